"""The campaign, bottom to top: its cells and name checks (``cells``, the leaf), the
agents and tasks it names, the typed settings (``settings``), the campaign itself
(``campaign``), the one reader of the configuration mapping (``reader``), the checks that
need the agents', tasks' and cache's files (``checks``), the steps in order (``config``),
and what scoring reads (``scoring``) and each job asks for (``resources``)."""
