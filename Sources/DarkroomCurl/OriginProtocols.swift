import CCurl
import Foundation

/// What the multi loops remember of each origin's HTTP version, to decide whether a new transfer
/// waits for a connection it could multiplex on (`CURLOPT_PIPEWAIT`).
///
/// Waiting pays off only for HTTP/2: a transfer that waits shares the connection being set up
/// instead of opening its own. For an HTTP/1.1 origin it serialises a burst: libcurl learns that
/// a connection cannot multiplex only from its first response's headers (or from ALPN over TLS),
/// and every transfer to that origin waits until then. So:
///
/// - `http://` never waits: transfers ask for HTTP/2 over TLS only (`CURL_HTTP_VERSION_2TLS`), so a
///   plain-text origin always speaks HTTP/1.1.
/// - `https://` waits unless the last transfer that finished there used HTTP/1.x. An unknown
///   origin waits only for the first connection's TLS handshake, where ALPN tells libcurl whether
///   it can multiplex; a server without ALPN holds the first burst until its first response, once.
///
/// Owned by ``CurlTransferLoops`` (under its lock), which also keeps every transfer to an origin
/// that may multiplex on one loop: a connection belongs to one loop's multi handle. At most ``capacity`` origins are kept; past that the least recently
/// used quarter is forgotten (and then treated as unknown).
struct OriginProtocols {
  enum Version: Equatable {
    case http1
    case http2
  }

  /// The most origins remembered.
  static let capacity = 1024

  private var known: [String: (version: Version, used: UInt64)] = [:]
  private var clock: UInt64 = 0

  var count: Int { known.count }

  /// Whether a new transfer to `url` should wait for a connection it can multiplex on.
  mutating func waitsForMultiplexing(_ url: String) -> Bool { multiplexingOrigin(url) != nil }

  /// The origin of `url` when a new transfer to it should wait for a connection it can multiplex
  /// on (``waitsForMultiplexing(_:)``); nil when it should not.
  mutating func multiplexingOrigin(_ url: String) -> String? {
    guard Self.isHTTPS(url), let origin = Self.origin(of: url), origin.hasPrefix("https://") else { return nil }
    guard let entry = known[origin] else { return origin }
    clock &+= 1
    known[origin] = (entry.version, clock)
    return entry.version == .http2 ? origin : nil
  }

  /// Remembers the version (`CURLINFO_HTTP_VERSION`) a transfer to `url` used; 0 (no response) is
  /// not remembered.
  mutating func record(_ url: String, httpVersion: Int) {
    // Only HTTPS origins are looked up (plain HTTP never waits): nothing else is worth parsing.
    guard httpVersion != 0, Self.isHTTPS(url), let origin = Self.origin(of: url) else { return }
    clock &+= 1
    known[origin] = (httpVersion >= Int(CURL_HTTP_VERSION_2_0) ? .http2 : .http1, clock)
    if known.count > Self.capacity { forgetLeastRecentlyUsed() }
  }

  private mutating func forgetLeastRecentlyUsed() {
    let oldest = known.sorted { $0.value.used < $1.value.used }.prefix(Self.capacity / 4)
    for (origin, _) in oldest { known.removeValue(forKey: origin) }
  }

  /// Whether `url` starts with `https:` (in any case), before it is parsed.
  static func isHTTPS(_ url: String) -> Bool {
    url.prefix(6).lowercased() == "https:"
  }

  /// `scheme://host:port`, lower case, with the scheme's default port filled in.
  static func origin(of url: String) -> String? {
    guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
      let host = components.host?.lowercased(), !host.isEmpty
    else { return nil }
    let port = components.port ?? (scheme == "https" ? 443 : 80)
    return "\(scheme)://\(host):\(port)"
  }
}
