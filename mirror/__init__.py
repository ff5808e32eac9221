"""The mirror: copies topics from one cluster to another, batches passing through unchanged.

An application on top of the clients (``broker.client``) and the audit; the ``lumber mirror`` command
(:mod:`lumber.cli.mirror`) runs it. :mod:`mirror.mirror` describes how it works.
"""
