"""Jinja2 templates of the HTML report and the dashboard (a package so installs ship them)."""
