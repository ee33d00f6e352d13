import Crypto
import Foundation

/// Digests of what a request carries besides its URL (header values such as `Authorization`), for
/// cache keys and shared in-flight work: two requests that may get different responses never share
/// an entry, and the values themselves never appear in keys, logs or events.
package enum RequestDigest {
  /// A SHA-256 digest (hex, 128 bits) of `headers`, independent of their order and of the case of
  /// their names; empty headers give an empty string.
  package static func headers(_ headers: [String: String]) -> String {
    guard !headers.isEmpty else { return "" }
    let canonical = headers.map { (name: $0.key.lowercased(), value: $0.value) }.sorted { $0.name < $1.name }
    var text = ""
    for (name, value) in canonical { text += "\(name.utf8.count):\(name)\(value.utf8.count):\(value)" }
    return hex(text, bytes: 16)
  }

  /// The first `bytes` bytes of the SHA-256 of `text`, as lower-case hex.
  package static func hex(_ text: String, bytes: Int = 32) -> String {
    hex(of: Data(text.utf8), bytes: bytes)
  }

  /// The first `bytes` bytes of the SHA-256 of `data`, as lower-case hex.
  package static func hex(of data: some DataProtocol, bytes: Int = 32) -> String {
    SHA256.hash(data: data).prefix(bytes).map { String(format: "%02x", $0) }.joined()
  }
}
