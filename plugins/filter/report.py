"""Filters over plugins/module_utils/report.py: a report (report.json) as Markdown or console text
(documentation: the sidecar <filter>.yml files). The report itself is made by the gpu_node_report action."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import report
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({"report_markdown": report.report_markdown, "report_text": report.report_text})
