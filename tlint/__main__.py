from tlint.cli import main

raise SystemExit(main())
