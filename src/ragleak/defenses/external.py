"""``external``: the defense axis of an endpoint target, whatever the user's service runs.

ragleak does not see inside a service it reaches over HTTP (or through a callable): no hook runs
here and no guarantee is read from the service. A grid cell against an endpoint runs this class
(or ``none``, where the user states that the service runs no defense), so that the cell's record
says plainly that the measured defense is the service's own and claims nothing for it.
"""

from __future__ import annotations

from ragleak.accounting.guarantee import Guarantee
from ragleak.defenses.base import Defense


class ExternalDefense(Defense):
    name = "external"
    version = "1"

    def guarantee(self) -> Guarantee:
        return Guarantee(notes="the endpoint's own defense, not visible to ragleak: no guarantee is read or claimed")
