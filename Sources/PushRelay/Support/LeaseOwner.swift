import Foundation

/// A name for this process in `lease_owner` columns: host, process id, the role (`delivery`,
/// `jobs`) and a random part, so two instances, or two services of one, never share a lease.
func leaseOwnerName(role: String) -> String {
    "\(ProcessInfo.processInfo.hostName.prefix(40))-\(getpid())-\(role)-\(UInt32.random(in: 0...UInt32.max))"
}
