"""The language-server front end: a thin pygls shell around the workspace engine."""
