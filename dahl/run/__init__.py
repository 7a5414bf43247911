"""A run composed from its parts: the plan (settings to adapters, lanes, store, recall), the
answer source, the stages, the report and summary; also ``dahl eval``'s benchmark run and the
dry run that prices a run before it spends.
"""
