import Crypto
import DarkroomCore
import Foundation

/// thumbor's URL signatures: HMAC-SHA1 of the path after the signature, in URL-safe base64.
///
/// A signed URL is `/{signature}/{signed path}`; thumbor's own signer (`libthumbor`) makes the same
/// signatures, so URLs built for a thumbor server are accepted unchanged.
///
/// ```swift
/// let signer = ThumborSignature(key: "secret")
/// let path = "300x200/smart/example.com/a.jpg"
/// let url = "/" + signer.sign(path) + "/" + path
/// #expect(try signer.verify(ThumborURL(path: url)))
/// ```
public struct ThumborSignature: Sendable {
  /// The HMAC's hash: SHA-1 for thumbor URLs, SHA-256 for preset URLs.
  public enum Algorithm: Sendable { case sha1, sha256 }

  private let key: [UInt8]
  /// The hash this signer uses.
  public let algorithm: Algorithm

  /// A signer with the server's secret key. A key whose characters all fit in Latin-1 is used as
  /// Latin-1 bytes, as libthumbor uses it (the same bytes as UTF-8 for ASCII keys); another key
  /// as UTF-8.
  public init(key: String, algorithm: Algorithm = .sha1) {
    self.algorithm = algorithm
    let scalars = key.unicodeScalars
    self.key = scalars.allSatisfy { $0.value < 256 } ? scalars.map { UInt8($0.value & 0xFF) } : Array(key.utf8)
  }

  /// The signature of `signedPath` (URL-safe base64, with padding, as thumbor writes it).
  public func sign(_ signedPath: String) -> String {
    let message = Data(signedPath.utf8)
    let code: Data
    switch algorithm {
    case .sha1: code = Data(HMAC<Insecure.SHA1>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    case .sha256: code = Data(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }
    return code.base64EncodedString().replacingOccurrences(of: "+", with: "-")
      .replacingOccurrences(of: "/", with: "_")
  }

  /// Whether `url` carries the right signature for its path (an `unsafe` URL never does). The
  /// comparison takes the same time wherever the signatures differ.
  public func verify(_ url: ThumborURL) -> Bool {
    guard let given = url.signature else { return false }
    return verify(given, path: url.signedPath)
  }

  /// Whether `signature` is the signature of `signedPath`, compared in constant time.
  public func verify(_ signature: String, path signedPath: String) -> Bool {
    let given = signature
    let expected = Array(sign(signedPath).utf8)
    let actual = Array(given.utf8)
    guard expected.count == actual.count else { return false }
    var difference: UInt8 = 0
    for (one, other) in zip(expected, actual) { difference |= one ^ other }
    return difference == 0
  }
}
