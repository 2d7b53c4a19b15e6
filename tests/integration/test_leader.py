#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Leader election end to end: two real kctrld processes against kube-apisim.

Timings: leaseDuration 3s, renewDeadline 2s, retryPeriod 500ms. The Lease
object on the simulator is the witness: who holds it, leaseTransitions,
and whether anybody still writes it (resourceVersion). Log lines are used
only where the Lease cannot show it (a process's own view of leadership).
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import BUILD, Apisim, Skip, run_tests, wait_for  # noqa: E402

LD, RD, RP = 3.0, 2.0, 0.5
NS, NAME = "default", "kctrld-test"
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" % (NS, NAME)


def lease(sim):
    code, obj = sim.json("GET", LEASE_PATH)
    return obj if code == 200 else None


def holder(sim):
    obj = lease(sim)
    return obj["spec"].get("holderIdentity") if obj else None


class Kctrld(taplib.Kctrld):
    def __init__(self, sim, identity):
        self.identity = identity
        super().__init__("kubeconfig: %s\n"
                         "leaderElection:\n  enabled: true\n  namespace: %s\n  name: %s\n"
                         "  leaseDuration: 3s\n  renewDeadline: 2s\n  retryPeriod: 500ms\n"
                         "metrics:\n  bindAddress: \"0\"\n" % (sim.kubeconfig, NS, NAME),
                         args=["--identity", identity])

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self):
        return super().stop(10, cont=True)


def two(sim):
    """Starts a, waits until it holds the Lease, then starts the standby b."""
    a = Kctrld(sim, "replica-a")
    wait_for(lambda: holder(sim) == "replica-a", timeout=10, what="replica-a to acquire")
    b = Kctrld(sim, "replica-b")
    wait_for(lambda: "new leader holder=replica-a" in b.log(), timeout=10,
             what="replica-b to observe the leader")
    return a, b


def check_binaries():
    for b in ("kctrld", "kube-apisim"):
        if not os.access(os.path.join(BUILD, b), os.X_OK):
            raise Skip("%s not built" % b)


def test_exactly_one_holds_the_lease():
    check_binaries()
    with Apisim() as sim:
        a, b = two(sim)
        try:
            first = lease(sim)
            assert first["spec"]["leaseDurationSeconds"] == 3
            assert first["spec"]["leaseTransitions"] == 0
            rvs = set()
            t0 = time.monotonic()
            while time.monotonic() - t0 < 3.0:
                obj = lease(sim)
                assert obj["spec"]["holderIdentity"] == "replica-a", obj
                assert obj["spec"]["leaseTransitions"] == 0, obj
                assert obj["spec"]["acquireTime"] == first["spec"]["acquireTime"]
                rvs.add(obj["metadata"]["resourceVersion"])
                time.sleep(0.1)
            # renewed about every retryPeriod by the holder only
            assert 4 <= len(rvs) <= 9, rvs
            assert a.proc.poll() is None and b.proc.poll() is None
            assert "acquired" not in b.log(), b.log()
        finally:
            a.stop()
            b.stop()


def test_sigstop_leader_then_standby_takes_over():
    check_binaries()
    with Apisim() as sim:
        a, b = two(sim)
        try:
            last_rv = lease(sim)["metadata"]["resourceVersion"]
            a.signal(signal.SIGSTOP)
            t_stop = time.monotonic()
            t_change = t_stop
            while True:
                obj = lease(sim)
                if obj["metadata"]["resourceVersion"] != last_rv:
                    last_rv = obj["metadata"]["resourceVersion"]
                    if obj["spec"]["holderIdentity"] == "replica-b":
                        break
                    t_change = time.monotonic()  # a renewal that was in flight
                assert time.monotonic() - t_stop < LD + 2.2 * RP + 2.0, "no takeover"
                time.sleep(0.02)
            took = time.monotonic() - t_stop
            print("# SIGSTOP -> takeover by replica-b after %.2f s (last change seen %.2f s before)"
                  % (took, time.monotonic() - t_change), flush=True)
            # not before the lease expired for b, and within LD + jittered RP
            assert took >= LD - RP - 0.1, took
            assert time.monotonic() - t_change <= LD + 2.2 * RP + 1.0, took
            assert obj["spec"]["leaseTransitions"] == 1, obj

            # a resumes: it must notice the loss and not lead (nor write the
            # Lease) until it re-acquires, which it cannot while b renews.
            a.signal(signal.SIGCONT)
            wait_for(lambda: "leadership lost" in a.log(), timeout=5,
                     what="replica-a to notice the loss")
            t0 = time.monotonic()
            while time.monotonic() - t0 < LD + 1.0:
                obj = lease(sim)
                assert obj["spec"]["holderIdentity"] == "replica-b", obj
                assert obj["spec"]["leaseTransitions"] == 1, obj
                time.sleep(0.1)
            assert a.log().count("acquired identity=replica-a") == 1, a.log()
            assert "new leader holder=replica-b" in a.log()
        finally:
            a.stop()
            b.stop()


def test_sigterm_releases_and_hands_over():
    check_binaries()
    with Apisim() as sim:
        a, b = two(sim)
        try:
            a.signal(signal.SIGTERM)
            t0 = time.monotonic()
            seen_free = False
            while True:
                obj = lease(sim)
                h = obj["spec"].get("holderIdentity")
                if h == "":
                    seen_free = True
                    assert obj["spec"]["leaseDurationSeconds"] == 1, obj
                    assert obj["spec"]["leaseTransitions"] == 0, obj
                    assert obj["spec"]["acquireTime"] == obj["spec"]["renewTime"], obj
                if h == "replica-b":
                    break
                assert time.monotonic() - t0 < 3.0, "no handover within 3 s: %r" % obj
                time.sleep(0.01)
            took = time.monotonic() - t0
            print("# SIGTERM -> handover to replica-b after %.2f s" % took, flush=True)
            assert took <= 2.2 * RP + 1.0, took  # a couple of seconds at most
            assert seen_free, "release not seen"
            assert obj["spec"]["leaseTransitions"] == 1, obj
            assert a.proc.wait(5) == 0, a.log()
            assert "released identity=replica-a" in a.log()
        finally:
            a.stop()
            b.stop()


def renewal_fault(fault):
    with Apisim() as sim:
        a = Kctrld(sim, "replica-a")
        try:
            wait_for(lambda: holder(sim) == "replica-a", timeout=10, what="acquire")
            before = lease(sim)
            sim.control("POST", "faults", dict(fault, method="PUT", pathPrefix=LEASE_PATH, count=-1))
            t0 = time.monotonic()
            last_rv, t_last = before["metadata"]["resourceVersion"], t0
            while "leadership lost" not in a.log():
                obj = lease(sim)
                if obj["metadata"]["resourceVersion"] != last_rv:
                    last_rv, t_last = obj["metadata"]["resourceVersion"], time.monotonic()
                assert time.monotonic() - t0 < RD + 2.0, "leadership not lost"
                time.sleep(0.02)
            lost_after = time.monotonic() - t_last
            print("# %s: leadership lost %.2f s after the last renewal" % (fault, lost_after),
                  flush=True)
            # at the renew deadline after the last renewal: before the lease
            # (3 s) could expire for anybody else
            assert RD - RP - 0.3 <= lost_after <= RD + 0.3, lost_after
            sim.control("DELETE", "faults")
            wait_for(lambda: a.log().count("acquired identity=replica-a") == 2, timeout=5,
                     what="re-acquire")
            after = lease(sim)
            assert after["spec"]["holderIdentity"] == "replica-a"
            assert after["spec"]["leaseTransitions"] == before["spec"]["leaseTransitions"]
            assert after["spec"]["acquireTime"] == before["spec"]["acquireTime"]
        finally:
            a.stop()


def test_renewal_500_loses_at_renew_deadline():
    check_binaries()
    renewal_fault({"action": "status", "code": 500})


def test_renewal_429_loses_at_renew_deadline():
    check_binaries()
    renewal_fault({"action": "status", "code": 429})


def test_renewal_stall_loses_at_renew_deadline():
    check_binaries()
    renewal_fault({"action": "stall"})


if __name__ == "__main__":
    run_tests(globals())
