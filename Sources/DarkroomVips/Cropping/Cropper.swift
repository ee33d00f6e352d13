import DarkroomCore

/// The area a ``Cropper`` keeps.
///
/// ```swift
/// let region = CropRegion.box(width: 100, height: 50, gravity: .north)
/// region.rectangle(inWidth: 400, height: 300)   // (x: 150, y: 0, width: 100, height: 50)
/// let cropper = Cropper(.relative(x: 0.1, y: 0.1, width: 0.8, height: 0.8))
/// ```
public enum CropRegion: Sendable, Hashable {
  /// A rectangle in relative coordinates, 0…1 of the width and height (Nimbus' `cropRect`).
  case relative(x: Double, y: Double, width: Double, height: Double)
  /// A rectangle in pixels.
  case pixels(x: Int, y: Int, width: Int, height: Int)
  /// A `width`×`height` pixel box anchored at a gravity.
  case box(width: Int, height: Int, gravity: Gravity)
  /// The most interesting `width`×`height` pixel box.
  case smart(width: Int, height: Int, strategy: SmartCropStrategy)

  /// The pixel rectangle this region selects in a `width`×`height` image (for geometric regions).
  public func rectangle(inWidth width: Int, height: Int) -> (x: Int, y: Int, width: Int, height: Int)? {
    switch self {
    case .relative(let rx, let ry, let rw, let rh):
      let x = min(width - 1, Int((rx * Double(width)).rounded()))
      let y = min(height - 1, Int((ry * Double(height)).rounded()))
      let w = max(1, min(width - x, Int((rw * Double(width)).rounded())))
      let h = max(1, min(height - y, Int((rh * Double(height)).rounded())))
      return (x, y, w, h)
    case .pixels(let x, let y, let w, let h):
      let left = min(max(0, x), width - 1)
      let top = min(max(0, y), height - 1)
      return (left, top, max(1, min(w, width - left)), max(1, min(h, height - top)))
    case .box(let w, let h, let gravity):
      let cw = min(w, width)
      let ch = min(h, height)
      let origin = gravity.origin(width: cw, height: ch, inWidth: width, height: height)
      return (origin.x, origin.y, cw, ch)
    case .smart:
      return nil
    }
  }
}

/// The `crop` stage: keeps part of an image — a relative or pixel rectangle, a box at a gravity,
/// or a smart crop.
///
/// Rectangles reaching past the image are clamped to it. A relative crop between a decoder and a
/// resizer is fused into shrink-on-load (relative coordinates do not depend on the load size).
///
/// ```swift
/// Cropper(.relative(x: 0.1, y: 0.1, width: 0.8, height: 0.8))
/// Cropper(.box(width: 400, height: 300, gravity: .north))
/// Cropper(.smart(width: 256, height: 256, strategy: .attention))
/// ```
public struct Cropper: Stage {
  public static let kind = "crop"

  public var region: CropRegion

  public init(_ region: CropRegion) { self.region = region }

  public var identifier: String {
    switch region {
    case .relative(let x, let y, let w, let h): "crop(rel:\(x),\(y),\(w),\(h))"
    case .pixels(let x, let y, let w, let h): "crop(px:\(x),\(y),\(w),\(h))"
    case .box(let w, let h, let gravity): "crop(box:\(w)x\(h),\(gravity.rawValue))"
    case .smart(let w, let h, let strategy): "crop(smart:\(w)x\(h),\(strategy.rawValue))"
    }
  }

  public func process(_ input: DecodedImage, context: StageContext) async throws -> DecodedImage {
    try await VipsKillScope.blocking(context, inputs: [input.image]) { try crop(input) }
  }

  /// Crops synchronously (call from a blocking-pool thread).
  public func crop(_ input: DecodedImage) throws(PipelineError) -> DecodedImage {
    let image = input.image
    if case .smart(let w, let h, let strategy) = region {
      // One frame's interesting part is not the next one's: an animation is cropped at the centre.
      guard image.isAnimated else { return input.reshaped(try image.smartCropped(width: w, height: h, strategy: strategy)) }
      return try Cropper(.box(width: w, height: h, gravity: .centre)).crop(input)
    }
    guard let rect = region.rectangle(inWidth: input.width, height: input.height) else { return input }
    return input.reshaped(
      try image.framewise("crop") { frame throws(PipelineError) in
        try frame.cropped(x: rect.x, y: rect.y, width: rect.width, height: rect.height)
      })
  }
}
