"""Which paths produce no events: Git's ignore rules (rules), judged off the event loop (judge),
as they are now while the files change (live)."""
