"""Event sources: adapters that turn editor, watcher, Git and CLI activity into observations."""
