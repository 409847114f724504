"""What more than one test file uses: real collectors and daemons, repositories that already
have history, and one way to wait for a readiness signal (:mod:`tests.support.waiting`)."""
