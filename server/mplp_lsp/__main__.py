from mplp_lsp.cli import main

raise SystemExit(main())
