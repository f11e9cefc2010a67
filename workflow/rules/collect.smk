# collect: tables and plots of every cell, where the hours went per stage (from each cell's
# benchmarks), marked for `snakemake --report` (a fixed number of results whatever the
# campaign's size), and the campaign viewer.
# `ptb-harness collect` writes the same from whatever exists when some cells have no score.


rule collect:
    input:
        metrics=every_cell(METRICS, *JUDGED),
    output:
        cells=report(
            OUT["cells"],
            caption="../report/cells.rst",
            category="Tables",
            labels={"result": "cells table"},
        ),
        leaderboard_csv=report(
            OUT["leaderboard_csv"],
            caption="../report/leaderboard.rst",
            category="Leaderboard",
            labels={"result": "leaderboard table"},
        ),
        leaderboard_md=OUT["leaderboard_md"],
        leaderboard_html=report(
            OUT["leaderboard_html"],
            caption="../report/leaderboard.rst",
            category="Leaderboard",
            labels={"result": "leaderboard"},
        ),
        leaderboard_png=report(
            OUT["leaderboard_png"],
            caption="../report/plot_leaderboard.rst",
            category="Leaderboard",
            labels={"result": "leaderboard plot"},
        ),
        heatmap_png=report(
            OUT["heatmap_png"],
            caption="../report/plot_heatmap.rst",
            category="Leaderboard",
            labels={"result": "task heatmap"},
        ),
        time_png=report(
            OUT["time_png"],
            caption="../report/plot_time.rst",
            category="Time",
            labels={"result": "time vs budget"},
        ),
        gpu_usage=report(
            OUT["gpu_usage"],
            caption="../report/gpu_usage.rst",
            category="GPU",
            labels={"result": "GPU use per cell and stage"},
        ),
        gpu_usage_png=report(
            OUT["gpu_usage_png"],
            caption="../report/plot_gpu_usage.rst",
            category="GPU",
            labels={"result": "GPU use per entry"},
        ),
        stage_hours=report(
            OUT["stage_hours"],
            caption="../report/stage_hours.rst",
            category="Time",
            labels={"result": "hours per stage"},
        ),
        viewer=OUT["viewer"],
    log:
        f"{RESULTS}/logs/collect.log",
    localrule: True
    script:
        "../scripts/collect.py"
