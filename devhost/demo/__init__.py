"""``python -m devhost.demo``: the whole pipeline under devhost, with a live dashboard and a chart."""
