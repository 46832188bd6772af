// Package fleet holds the words that the core, the choke point and the
// adapters all speak: what a runner fleet is made of as the reaper sees it
// (pods, registrations, ARC's runner objects, scopes), the verdicts and the
// marks a ledger keeps of them, what a write answered, and why a runner
// list gave no verdict. It sits below all of them, so that an adapter can
// hand the core a pod, and the choke point a result, without importing
// either; it holds types and the rules that belong to a type alone (how a
// scope is parsed, how a list's error is classified), and no I/O.
package fleet
