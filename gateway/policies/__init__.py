"""Who a request goes to and when it resolves: routing, plans, the evaluator, votes, timers."""
