"""Reading a workspace's Git repository: refs, reflogs and commit metadata, without network."""
