"""What the dashboards show: pages (static/), the timeline and graph queries, the login codes;
the aiohttp routes are api.dashboard (local), collector.dashboard (team) and
api.dashboard_shell (headers, login, assets for both).

The pages are plain HTML, CSS and ES modules shipped as package data (``static/``), so
``pip install`` alone gives a working UI: nothing is built or downloaded at install or run
time. The server does the heavy lifting (time buckets, graph queries); the browser draws.
"""
