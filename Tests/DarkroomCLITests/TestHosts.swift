import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The project's own test hosts: network namespaces (`ip netns`), each joined to this one by a
/// veth link on a subnet of its own, so that programs run in them reach this machine only over
/// that link, as another machine would over its network.
///
/// Host `i` (from 1) is the namespace `drk-TAG-i`; its end of the link has the address
/// `10.N.i.2/24` and this machine's end (its ``Host/gateway``) `10.N.i.1/24`, with `N` and `TAG`
/// chosen at random so that runs never meet. Making them needs root and iproute2;
/// ``make(_:)`` says why when they cannot be made.
struct TestHosts {
  struct Host {
    /// The namespace's name (for `ip netns exec`).
    let namespace: String
    /// This machine's end of the link, as the host sees it: the address a server here listens on.
    let gateway: String
    /// The host's own address.
    let address: String
    /// The link's end on this machine (setting it down cuts the host off).
    let link: String
  }

  let hosts: [Host]
  let ip: String

  /// Why test hosts cannot be made here.
  struct Unavailable: Error, CustomStringConvertible {
    let description: String
  }

  /// Makes `count` hosts, or throws ``Unavailable`` saying why they cannot be made.
  static func make(_ count: Int) async throws -> TestHosts {
    guard geteuid() == 0 else { throw Unavailable(description: "making network namespaces needs root") }
    guard let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first(where: FileManager.default.isExecutableFile)
    else { throw Unavailable(description: "iproute2's ip is not installed (apt-get install iproute2)") }
    let tag = String(UInt32.random(in: 0x10000...0xFFFFF), radix: 16)
    let network = Int.random(in: 100...250)
    var made = TestHosts(hosts: [], ip: ip)
    for index in 1...count {
      let host = Host(
        namespace: "drk-\(tag)-\(index)", gateway: "10.\(network).\(index).1", address: "10.\(network).\(index).2",
        link: "drk\(tag)\(index)h")
      let inside = "drk\(tag)\(index)w"
      let steps: [[String]] = [
        ["netns", "add", host.namespace],
        ["link", "add", host.link, "type", "veth", "peer", "name", inside],
        ["link", "set", inside, "netns", host.namespace],
        ["addr", "add", host.gateway + "/24", "dev", host.link],
        ["link", "set", host.link, "up"],
        ["netns", "exec", host.namespace, ip, "addr", "add", host.address + "/24", "dev", inside],
        ["netns", "exec", host.namespace, ip, "link", "set", inside, "up"],
        ["netns", "exec", host.namespace, ip, "link", "set", "lo", "up"],
      ]
      made = TestHosts(hosts: made.hosts + [host], ip: ip)
      for step in steps {
        let result = try await Runner.capture(executable: ip, arguments: step)
        guard result.status == 0 else {
          await made.remove()
          throw Unavailable(description: "`ip \(step.joined(separator: " "))` failed: \(result.stderr)")
        }
      }
    }
    return made
  }

  /// Removes the hosts (a namespace takes its end of the link with it, and the link goes).
  func remove() async {
    for host in hosts {
      _ = try? await Runner.capture(executable: ip, arguments: ["netns", "del", host.namespace])
      _ = try? await Runner.capture(executable: ip, arguments: ["link", "del", host.link])
    }
  }

  /// Cuts `host`'s link (`up: false`) or joins it again.
  func setLink(of host: Host, up: Bool) async throws {
    let result = try await Runner.capture(executable: ip, arguments: ["link", "set", host.link, up ? "up" : "down"])
    guard result.status == 0 else {
      throw Unavailable(description: "cannot set \(host.link) \(up ? "up" : "down"): \(result.stderr)")
    }
  }

  /// Starts the runner with `arguments` on `host`.
  func start(_ arguments: [String], on host: Host) throws -> StreamingChild {
    try StreamingChild.start(["netns", "exec", host.namespace, Runner.executable] + arguments, executable: ip)
  }
}
