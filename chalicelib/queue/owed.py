"""Notifier jobs a restock owes: recorded on the restock in the transaction that makes them owed, then sent.

A restock owes a job while it carries pending_key/pending_since/pending_kind/pending_token (the sparse index
"by-pending"). Whoever made it owed (detection for a restock or a rise, capture for a place that joined while
units waited for nobody) sends it at once through `OwedJobs.send`; a crash before that is finished by the
sweep, which sends every job owed for over a minute (invariant 7). `enqueue_lease_until` lets one sender at a
time send it; a double job is harmless anyway (the notifier tells nobody twice).
"""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.faults import FaultHook, no_faults
from chalicelib.queue.jobs import JobQueue
from chalicelib.queue.messages import Job
from chalicelib.tables.restocks import RestocksTable

# Longest a sender may hold the right to send a job. It equals the Lambda timeout, so a holder still
# silent after it is dead and anyone (a retry, the sweep) may take over.
ENQUEUE_LEASE_S = 30


@dataclass(frozen=True, kw_only=True, eq=False)
class OwedJobs:
    """Sends the job a restock owes, once, if nobody else is sending it."""

    restocks: RestocksTable
    jobs: JobQueue
    faults: FaultHook = no_faults

    def send(self, sku: str, restock_ts: str, now: float) -> bool:
        """Send the job `restock_ts` owes, if nobody else is sending it; True when this call sent it."""
        claimed = self.restocks.claim_enqueue(sku, restock_ts, now=now, lease_s=ENQUEUE_LEASE_S)
        if claimed is None:
            return False
        token = str(claimed.pending_token)
        self.faults("detect.after_enqueue_claimed")
        job = Job(sku, claimed.restock_id, restock_ts, kind=claimed.pending_kind or "restock")
        try:
            self.jobs.send(job)
        except Exception:
            # Hand the lease back so a retry can send it now rather than after the lease.
            self.restocks.release_enqueue(sku, restock_ts, token=token)
            raise
        self.faults("detect.after_job_sent")
        self.restocks.mark_enqueued(sku, restock_ts, token=token, now=now)
        return True
