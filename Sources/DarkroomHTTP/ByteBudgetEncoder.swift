import Darkroom

/// thumbor's `max_bytes(N)`: encodes, and when the result is over `maxBytes`, lowers the quality
/// (a binary search, about 7 encodes at most) to the highest one that fits, or the smallest
/// result when none does, as thumbor does. Lossless output (PNG, GIF) is encoded once.
///
/// The image is decoded into memory first, since it is encoded more than once; at an image
/// server's output sizes that is small.
struct ByteBudgetEncoder: Stage {
  static let kind = "encode"

  var encoder: ImageEncoder
  var maxBytes: Int

  var identifier: String { "\(encoder.identifier),maxBytes=\(maxBytes)" }

  func process(_ input: DecodedImage, context: StageContext) async throws -> EncodedImage {
    try await VipsKillScope.blocking(context, inputs: [input.image]) { try encode(input) }
  }

  func encode(_ input: DecodedImage) throws(PipelineError) -> EncodedImage {
    let held = input.reshaped(try input.image.materialized())
    let first = try encoder.encode(held)
    // What the format is for this image: `jpegOrPNG` is PNG (lossless) for an image with alpha.
    let concrete = encoder.format.resolved(
      for: held.sourceFormat, hasAlpha: held.image.hasAlpha, animated: held.image.isAnimated)
    guard first.bytes.count > maxBytes, let start = Self.quality(of: concrete), start > 1 else { return first }
    var best: EncodedImage?
    var smallest = first
    var low = 1
    var high = start - 1
    while low <= high {
      let quality = (low + high) / 2
      var attempt = encoder
      attempt.format = Self.format(concrete, quality: quality)
      let encoded = try attempt.encode(held)
      if encoded.bytes.count < smallest.bytes.count { smallest = encoded }
      if encoded.bytes.count <= maxBytes {
        best = encoded
        low = quality + 1
      } else {
        high = quality - 1
      }
    }
    return best ?? smallest
  }

  /// The quality of a lossy format, or `nil` for a lossless one.
  static func quality(of format: EncodeFormat) -> Int? {
    switch format {
    case .jpeg(let quality, _), .jpegOrPNG(let quality): quality
    case .webp(let quality, let lossless, _), .avif(let quality, let lossless, _): lossless ? nil : quality
    default: nil
    }
  }

  static func format(_ format: EncodeFormat, quality: Int) -> EncodeFormat {
    switch format {
    case .jpeg(_, let progressive): .jpeg(quality: quality, progressive: progressive)
    case .jpegOrPNG: .jpegOrPNG(quality: quality)
    case .webp(_, let lossless, let effort): .webp(quality: quality, lossless: lossless, effort: effort)
    case .avif(_, let lossless, let effort): .avif(quality: quality, lossless: lossless, effort: effort)
    default: format
    }
  }
}
