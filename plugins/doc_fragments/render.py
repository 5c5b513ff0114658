"""The render options every module of the collection that writes node files shares."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  render_dir:
    description: Render instead of apply, into this folder on the machine the module runs on (the controller).
    type: path
  render_host:
    description: The host name to render under (with O(render_dir)).
    type: str
"""
