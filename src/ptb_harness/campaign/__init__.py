"""The campaign: its schema-checked configuration and typed settings, the grid of cells,
the agents and tasks it names and the resources each job asks for."""
