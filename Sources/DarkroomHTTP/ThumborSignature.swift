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
  private let key: [UInt8]

  /// A signer with the server's secret key. A key whose characters all fit in Latin-1 is used as
  /// Latin-1 bytes, as libthumbor uses it (the same bytes as UTF-8 for ASCII keys); another key
  /// as UTF-8.
  public init(key: String) {
    let scalars = key.unicodeScalars
    self.key = scalars.allSatisfy { $0.value < 256 } ? scalars.map { UInt8($0.value & 0xFF) } : Array(key.utf8)
  }

  /// The signature of `signedPath` (URL-safe base64, with padding, as thumbor writes it).
  public func sign(_ signedPath: String) -> String {
    let code = HMAC<Insecure.SHA1>.authenticationCode(for: Data(signedPath.utf8), using: SymmetricKey(data: key))
    return Data(code).base64EncodedString().replacingOccurrences(of: "+", with: "-")
      .replacingOccurrences(of: "/", with: "_")
  }

  /// Whether `url` carries the right signature for its path (an `unsafe` URL never does). The
  /// comparison takes the same time wherever the signatures differ.
  public func verify(_ url: ThumborURL) -> Bool {
    guard let given = url.signature else { return false }
    let expected = Array(sign(url.signedPath).utf8)
    let actual = Array(given.utf8)
    guard expected.count == actual.count else { return false }
    var difference: UInt8 = 0
    for (one, other) in zip(expected, actual) { difference |= one ^ other }
    return difference == 0
  }
}
