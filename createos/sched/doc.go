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
//     request starts at once while the window's recent rate (its admissions
//     per window, this one included) continued from now, with what the
//     window still holds and this request, fits its class's share at every
//     point of the next window: on an idle account half the share goes at
//     once, and a busy minute that is over leaves the room its admissions
//     make as they leave. Past that, the next start comes no sooner after
//     the newest admission than the even gap that spreads what is left of
//     the share until the admissions ahead of it leave the window.
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
//     MinPerMinute and MaxPerMinute bound what a config may ask.
//   - reserveShare (40): each reserve is a fortieth of N (at least one): at
//     270, six endings at once on a saturated account, within the host's
//     10 s for a session close.
//   - recentSpan (15 s): how long after a request had to wait the account
//     counts as under sustained load, which is spread and never burst;
//     short enough that a heartbeat after a busy minute that ended goes at
//     once.
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
