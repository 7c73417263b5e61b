"""Open the transport a profile names: the agent's socket when one runs (or ``persist``
starts one), else a connection of this process's own (asyncssh, or the system ``ssh``)."""

from __future__ import annotations

from remote_chain.transport.agent import open_via_agent
from remote_chain.transport.base import Remote
from remote_chain.transport.endpoint import Endpoint
from remote_chain.transport.openssh import OpensshRemote
from remote_chain.transport.ssh import SshRemote


async def open_remote(endpoint: Endpoint) -> Remote:
    """Connect to ``endpoint`` with the transport it names; errors are ``RemoteError``s."""
    if endpoint.transport == "openssh":
        return await OpensshRemote.open(endpoint)
    # The persistent connection: through a running agent, or one started when the profile
    # asks (persist); None means the direct path (any fallback is logged).
    through_agent = await open_via_agent(endpoint)
    if through_agent is not None:
        return through_agent
    return await SshRemote.open(endpoint)
