import Darkroom

/// thumbor's `adaptive-fit-in` and `full-fit-in`, which need the image's size to choose the box.
///
/// `adaptive-fit-in` fits into the box, or into the box turned 90° when the image's orientation
/// and the box's differ (a portrait photo in a landscape box); `full-fit-in` scales so that the
/// image covers the box on both sides, keeping its proportion and cropping nothing.
struct ThumborFit: Stage {
  static let kind = "thumbor-fit"

  enum Mode: String, Sendable { case adaptive, full }

  var mode: Mode
  var width: Int
  var height: Int
  var upscale: Bool
  /// The most pixels the scaled image may have.
  var maxPixels = ImageDecoder.defaultMaxPixels

  var identifier: String { "thumbor-fit(\(mode.rawValue),\(width)x\(height),upscale=\(upscale))" }

  func process(_ input: DecodedImage, context: StageContext) async throws -> DecodedImage {
    try await VipsKillScope.blocking(context, inputs: [input.image]) {
      try resizer(forWidth: input.width, height: input.height).resize(input)
    }
  }

  /// The resize this stage makes of an image of `imageWidth`×`imageHeight`.
  func resizer(forWidth imageWidth: Int, height imageHeight: Int) -> Resizer {
    switch mode {
    case .adaptive:
      let boxIsLandscape = width >= height
      let imageIsLandscape = imageWidth >= imageHeight
      let (w, h) = boxIsLandscape == imageIsLandscape || width == 0 || height == 0 ? (width, height) : (height, width)
      return Resizer(width: w > 0 ? w : nil, height: h > 0 ? h : nil, mode: .fit, upscale: upscale, maxPixels: maxPixels)
    case .full:
      guard width > 0, height > 0, imageWidth > 0, imageHeight > 0 else {
        return Resizer(
          width: width > 0 ? width : nil, height: height > 0 ? height : nil, mode: .fit, upscale: upscale, maxPixels: maxPixels)
      }
      // Cover: the larger of the two scales decides, the other side comes out over the box.
      let coversByWidth = Double(width) / Double(imageWidth) >= Double(height) / Double(imageHeight)
      return coversByWidth
        ? Resizer(width: width, height: nil, mode: .fit, upscale: upscale, maxPixels: maxPixels)
        : Resizer(width: nil, height: height, mode: .fit, upscale: upscale, maxPixels: maxPixels)
    }
  }
}
