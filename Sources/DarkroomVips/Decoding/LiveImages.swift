import DarkroomCore

/// A decoded image held in memory and shared by every operation that decodes the same bytes
/// with the same decoder settings while it is alive.
package final class LiveDecodedImage: Sendable {
  /// The decoded image (its pixels are in memory, safe for concurrent readers).
  public let decoded: DecodedImage

  init(_ decoded: DecodedImage) { self.decoded = decoded }
}

/// The process's registry of live decoded images (CZSharedImage for servers): a `decode` stage
/// with `share` returns the image another operation already decoded from identical bytes, as long
/// as that image is still in use somewhere. Nothing is kept once the last user lets go.
///
/// Keys are the bytes themselves (hashed by size and their first and last 64 bytes, compared in
/// full), so a different file with the same name never shares, and the same bytes under two
/// paths or URLs do.
///
/// ```swift
/// let decode = ImageDecoder(share: true)
/// async let a = decode.process(fetched, context: context)
/// async let b = decode.process(fetched, context: context)   // one decode; a.image === b.image
/// ```
package enum LiveImages {
  public struct Key: Hashable, Sendable {
    public var bytes: ImageBytes
    public var decoder: String

    public init(bytes: ImageBytes, decoder: String) {
      self.bytes = bytes
      self.decoder = decoder
    }
  }

  /// The shared registry.
  public static let shared = LiveObjectRegistry<Key, LiveDecodedImage>()
}
