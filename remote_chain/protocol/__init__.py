"""PURE: what the client, the login node and the job share, each name spelled once.

``layout`` (the run folder's names, event kinds, the run record), ``wire`` (the codec of every
answer an exec prints), ``markers`` (the frame around a script's output, apart from a login
shell's noise), ``guard`` (the ownership guard's trusted files).
"""
