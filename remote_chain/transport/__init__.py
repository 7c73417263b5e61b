"""Transport: the ``Remote`` seam (``base``) and its implementations.

``ssh`` (asyncssh: the only module that imports it, with ``sshconfig``'s reading of the ssh
config), ``openssh`` (the system ``ssh`` over a ControlMaster), ``agent`` and ``shell`` (the
optional persistent connection and its shell channel), ``connect.open_remote`` (which one a
profile gets). Nothing outside this folder knows asyncssh's types.
"""
