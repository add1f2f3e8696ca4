from floe_harness.cli import main

raise SystemExit(main())
