"""`make chaos` (issue 32): the appliance under a mixed load through every door while its
services are killed (`kill -9`), hung (`SIGSTOP` 30 s, then `SIGCONT`), restarted cleanly
through the supervisor or starved of disk; what was lost, duplicated, how long each client path
took to answer again. `python -m bench.chaos --help`; results in bench/results/chaos.md."""
