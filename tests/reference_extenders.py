"""The gpushare extender of the reference clusters (the gpushare design and kubeasz 1.23 clusters of
docs/field-notes.md: their Policy files), in the neutral form the scheduler filters take and give."""


def gpushare(url="http://192.168.233.101:32766/gpushare-scheduler", **extra):
    """The gpushare extender entry at ``url``, with ``extra`` keys set over it."""
    return {
        "url_prefix": url,
        "filter_verb": "filter",
        "bind_verb": "bind",
        "enable_https": False,
        "node_cache_capable": True,
        "managed_resources": [{"name": "aliyun.com/gpu-mem", "ignored_by_scheduler": False}],
        "ignorable": False,
        **extra,
    }
