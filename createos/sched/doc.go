// Package sched is the CreateOS request scheduler: every request to one
// API account (an origin and key) waits here for its turn, and the Turn it
// gets is its admission.
//
// The model:
//
//   - A sliding window of N per 60 s, with reserves per class. At most N
//     requests start in any window (counted when each is admitted). Endings
//     may fill it, live requests all but one reserve, work all but two: what
//     work leaves is room that endings and live requests always find.
//   - Bursts at once, sustained load spread. On a quiet account (no request
//     had to wait within recentSpan, no rejection within quietPeriod) a
//     request starts at once while fewer than a burstShare-th of its
//     class's share (at least burstFloor) started within recentSpan, and
//     while the window's recent rate (its admissions per window, this one
//     included) continued from now, with what the window still holds and
//     this request, fits the share at every point of the next window (half
//     the share on an idle account; a busy minute that is over leaves the
//     room its admissions make as they leave). Past that, the next start
//     comes no sooner after the newest admission than the even gap that
//     spreads what is left of the share until the admissions ahead of it
//     leave the window. The burst is a fifth because the sliding window
//     makes every burst be paid back within the minute it counts in: a
//     team whose first seconds took half the share (enough for four lease
//     lifecycles at once) ran the rest of its first minute at half pace,
//     and the host's file-bridge relays took up to 15 s (bound 10 s) and
//     duplex PINGs up to 27 s (bound 20 s) in make bench-scale; at a fifth
//     they stay within both.
//   - Deadline-aware turns. Each start goes to an ending first, in arrival
//     order; then to work due within dueSoon of its due time (before live
//     requests unless one waits longer past dueSoon after it asked than the
//     work does past becoming due, and always within dueLast); then to live
//     requests; then to work.
//   - Fair between companies, then leases. Within a class the company
//     served longest ago goes first, within it the lease served longest ago;
//     a lease's requests go in arrival order. A turn that admits a request of
//     a Group carries every request of that group its lease has waiting,
//     while Group.Fits holds.
//   - What a rejection teaches is one thing: the window the provider really
//     grants. A 429 under sustained load, after the provider took requests
//     since the last one, makes N what the window then held; one after the
//     wait the provider asked for, with nothing taken since, is an outage and
//     undoes that. N grows back by one reserve each quietPeriod without a
//     rejection. The Retry-After a 429 carries is obeyed, not learned:
//     nothing but endings starts before it is over.
//
// The knobs and their reasons:
//
//   - window (60 s): the span the provider's limit counts.
//   - DefaultPerMinute (270): a tenth below the documented 300, for the
//     provider's clock and a network that delivers requests unevenly;
//     MinPerMinute (10) is the smallest a config may ask, and the floor no
//     rejection shrinks a window below (the provider's 300 is config's bound).
//   - reserveShare (40): each reserve is a fortieth of N (at least one): at
//     270, six endings at once on a saturated account, within the host's
//     10 s for a session close.
//   - burstShare (5), burstFloor (8): a fifth of the share goes at once,
//     and at least what two leases' start and end send (the rootfs catalog,
//     create, the ready check, the delete) on a small account.
//   - recentSpan (window/(burstShare-1), 15 s): how long the pace that pays
//     a burst back takes to admit a burst's worth; what started within it
//     counts against a burst, and a request that had to wait within it
//     means sustained load, which is spread and never burst.
//   - dueSoon (6 s): the host's run-log tail gives up after three polls that
//     time out, so work within dueSoon of its end goes before live requests;
//     it is also a live request's target.
//   - dueLast (2 s): work this close to its end goes first whatever waits.
//   - quietPeriod (30 s): how long after a rejection nothing bursts, and
//     each step by which a shrunk N grows back: slow enough that the
//     reserves absorb a step the provider does not grant.
//   - servedMemory (4096): how many turns a company's or lease's last turn is
//     remembered for; older ones sort before every waiter anyway.
//
// What it keeps from golang.org/x/time/rate: a Limiter with few knobs (there
// a limit and a burst; here N and the burst rule that derives from it), a
// wait that ends with its context and gives an unused admission back. It
// counts a sliding window rather than a token bucket because the provider's
// limit is a count per minute: a bucket of burst B would either refuse the
// window's slack or overrun it.
//
// What it keeps from Kubernetes API Priority and Fairness (fairqueuing/
// queueset): priority levels with seats reserved per level (here the
// classes and their reserves), and fair queuing between flows, served
// round-robin by who was served longest ago (here companies, then leases;
// no shuffle sharding, since the flows are few and known). It drops the
// virtual-time estimate of service time: a turn is one request, whose cost
// is one slot of the window.
package sched
