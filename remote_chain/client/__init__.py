"""The client's flows: a session per cluster (``cluster``), the clusters of one invocation
(``fleet``), the flows as awaitables (``orchestrator``), what a submit sends (``plan``),
answers read into results (``outcomes``), the local run index (``index``, ``runs``), and how
long ``wait`` polls through an unreachable cluster (``reachability``)."""
