"""The dashboards: the local one served by the daemon's API and the team one by the collector.

The pages are plain HTML, CSS and ES modules shipped as package data (``static/``), so
``pip install`` alone gives a working UI: nothing is built or downloaded at install or run
time. The server does the heavy lifting (time buckets, graph queries); the browser draws.
"""
