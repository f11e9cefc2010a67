"""The GPU layer, by concern, each module with one entry: ``ids`` (the GPU ids a job was
given, from the environment), ``nvml`` (the node's GPUs and their processes),
``lease`` (cards leased from site.gpu_pool), ``cellset`` (the cell's GPU set, resolved
once), ``reap`` (leftover processes killed, only on the cell's GPUs) and ``monitor``
(the cell's GPUs sampled while a stage runs). Import from the modules; nothing is
re-exported here.
"""
