import DarkroomCore

/// How a ``Resizer`` fits an image to its box.
///
/// ```swift
/// Resizer(width: 300, height: 200, mode: .fit)    // a 600×600 image becomes 200×200
/// Resizer(width: 300, height: 200, mode: .fill)   // 300×200, the excess cropped
/// ```
public enum ResizeMode: String, Sendable, Hashable, Codable, CaseIterable {
  /// Scale to fit inside the box, keeping the aspect ratio (the result may be smaller on one side).
  case fit
  /// Scale to cover the box, keeping the aspect ratio, then crop the excess (gravity applies).
  case fill
  /// Scale each side to the box exactly, changing the aspect ratio.
  case stretch
  /// No scaling: crop or pad to the box (gravity applies).
  case center
}

/// The `resize` stage: scales an image to a box with a mode and a kernel.
///
/// `width` or `height` may be left out (`nil`) to scale by the other alone. `upscale` is off by
/// default: images smaller than the box are not enlarged. After a decoder the optimizer fuses the
/// resize into shrink-on-load.
///
/// ```swift
/// Resizer(width: 300, height: 300, mode: .fit)
/// Resizer(width: 256, height: 256, mode: .fill, crop: .smart(.attention))
/// ```
public struct Resizer: Stage {
  public static let kind = "resize"

  /// Where `fill` crops and `center` crops or pads.
  public enum Anchor: Sendable, Hashable {
    case gravity(Gravity)
    case smart(SmartCropStrategy)
  }

  public var width: Int?
  public var height: Int?
  public var mode: ResizeMode
  public var kernel: ResizeKernel
  public var upscale: Bool
  public var anchor: Anchor
  /// Padding colour for `center` (RGBA, 0…255).
  public var background: [Double]
  /// The most pixels the scaled image may have (before `fill` crops): an upscale asked for by a
  /// URL or a file cannot make an image of unbounded size. Over it, `imageTooLarge`.
  public var maxPixels: Int

  public init(
    width: Int? = nil, height: Int? = nil, mode: ResizeMode = .fit, kernel: ResizeKernel = .lanczos3, upscale: Bool = false,
    crop anchor: Anchor = .gravity(.centre), background: [Double] = [0, 0, 0, 255], maxPixels: Int = ImageDecoder.defaultMaxPixels
  ) {
    self.maxPixels = maxPixels
    self.width = width
    self.height = height
    self.mode = mode
    self.kernel = kernel
    self.upscale = upscale
    self.anchor = anchor
    self.background = background
  }

  public var identifier: String {
    let anchorText: String
    switch anchor {
    case .gravity(let gravity): anchorText = gravity.rawValue
    case .smart(let strategy): anchorText = strategy.rawValue
    }
    return "resize(\(width.map(String.init) ?? "auto")x\(height.map(String.init) ?? "auto"),\(mode.rawValue),\(kernel.rawValue),"
      + "upscale=\(upscale),\(anchorText),background=\(background.map { String($0) }.joined(separator: "/")))"
  }

  /// The size an image of `inputWidth`×`inputHeight` is scaled to, before `fill` crops or `center`
  /// pads to the box.
  public func scaledSize(inputWidth: Int, inputHeight: Int) -> (width: Int, height: Int) {
    let w = Double(inputWidth)
    let h = Double(inputHeight)
    let sx = width.map { Double($0) / w }
    let sy = height.map { Double($0) / h }
    func cap(_ scale: Double) -> Double { upscale ? scale : min(scale, 1) }
    func size(_ hs: Double, _ vs: Double) -> (Int, Int) {
      (max(1, Int((w * hs).rounded())), max(1, Int((h * vs).rounded())))
    }
    switch mode {
    case .center:
      return (inputWidth, inputHeight)
    case .stretch:
      let hs = cap(sx ?? sy ?? 1)
      let vs = cap(sy ?? sx ?? 1)
      return size(hs, vs)
    case .fit, .fill:
      let scale: Double
      switch (sx, sy) {
      case (let a?, let b?): scale = mode == .fit ? min(a, b) : max(a, b)
      case (let a?, nil): scale = a
      case (nil, let b?): scale = b
      case (nil, nil): scale = 1
      }
      let capped = cap(scale)
      // Fit results land exactly on the box side that limits them (no 299-pixel thumbnails).
      var result = size(capped, capped)
      if capped == sx, let width { result.0 = width }
      if capped == sy, let height { result.1 = height }
      return result
    }
  }

  /// The final box: the scaled size cropped (`fill`) or cropped/padded (`center`) to the box.
  public func outputSize(inputWidth: Int, inputHeight: Int) -> (width: Int, height: Int) {
    let scaled = scaledSize(inputWidth: inputWidth, inputHeight: inputHeight)
    switch mode {
    case .fill: return (min(width ?? scaled.width, scaled.width), min(height ?? scaled.height, scaled.height))
    case .center: return (width ?? scaled.width, height ?? scaled.height)
    case .fit, .stretch: return scaled
    }
  }

  public func process(_ input: DecodedImage, context: StageContext) async throws -> DecodedImage {
    try await VipsKillScope.blocking(context, inputs: [input.image]) { try resize(input) }
  }

  /// Resizes synchronously (call from a blocking-pool thread).
  public func resize(_ input: DecodedImage) throws(PipelineError) -> DecodedImage {
    let target = scaledSize(inputWidth: input.width, inputHeight: input.height)
    guard input.image.isAnimated else { return keepingColours(input, try apply(to: input.image, scaledTo: target)) }
    // Every frame alike; a smart crop would move between frames, so an animation fills at the centre.
    var centred = self
    if case .smart = anchor { centred.anchor = .gravity(.centre) }
    let framewise = centred
    let (area, overflow) = target.width.multipliedReportingOverflow(by: target.height)
    let (pixels, overflow2) = area.multipliedReportingOverflow(by: input.frameCount)
    if overflow || overflow2 || pixels > maxPixels {
      throw PipelineError(
        .imageTooLarge,
        "resizing would make \(input.frameCount) frames of \(target.width)×\(target.height) pixels, over the limit of "
          + "\(maxPixels) pixels (every frame counts): ask for a smaller size (or no upscaling)")
    }
    return keepingColours(
      input,
      try input.image.framewise("resize") { frame throws(PipelineError) in try framewise.apply(to: frame, scaledTo: target) })
  }

  /// The resized image: scaling mixes neighbouring colours but adds none of its own, unless the
  /// `center` mode pads it with the background.
  func keepingColours(_ input: DecodedImage, _ image: VipsImage) -> DecodedImage {
    mode == .center ? input.with(image) : input.reshaped(image)
  }

  /// Throws `imageTooLarge` when the scaled image, or the box it is padded to, would be over
  /// ``maxPixels``.
  func checkSize(_ target: (width: Int, height: Int)) throws(PipelineError) {
    let scaled = target.width.multipliedReportingOverflow(by: target.height)
    let box = (width ?? 0).multipliedReportingOverflow(by: height ?? 0)
    guard scaled.overflow || scaled.partialValue > maxPixels || box.overflow || box.partialValue > maxPixels else { return }
    let shown =
      scaled.overflow || scaled.partialValue > maxPixels ? "\(target.width)×\(target.height)" : "\(width ?? 0)×\(height ?? 0)"
    throw PipelineError(
      .imageTooLarge,
      "resizing would make a \(shown) pixel image, over the limit of \(maxPixels) pixels: ask for a smaller size (or no upscaling)"
    )
  }

  /// Scales `image` to `target` exactly, then crops or pads to the box. The fused decoder calls
  /// this with a target computed from the full-size image, so both paths give the same size, and
  /// with the `extent` the image's pixels really cover when its last row and column are partial
  /// (a JPEG decoded at M/8): the scale is taken from it, and the partial edge cropped off.
  /// `rowsReduced` says the decoder reduced the rows already (``DirectJPEG/loadReduced``): only
  /// the columns are left to reduce.
  func apply(
    to image: VipsImage, scaledTo target: (width: Int, height: Int), from extent: (width: Double, height: Double)? = nil,
    rowsReduced: Bool = false, finishing: Bool = true
  ) throws(PipelineError) -> VipsImage {
    try checkSize(target)
    var result = image
    if result.width != target.width || result.height != target.height {
      let from = extent ?? (Double(result.width), Double(result.height))
      result = try result.resized(
        horizontal: Double(target.width) / from.width, vertical: rowsReduced ? 1 : Double(target.height) / from.height,
        kernel: kernel)
      if result.width != target.width || result.height != target.height {
        // Guard against a one-pixel rounding difference inside libvips.
        result = try result.placed(inWidth: target.width, height: target.height, gravity: .northwest, background: background)
      }
    }
    guard finishing else { return result }
    switch mode {
    case .fit, .stretch:
      return result
    case .fill:
      let boxWidth = min(width ?? result.width, result.width)
      let boxHeight = min(height ?? result.height, result.height)
      switch anchor {
      case .smart(let strategy): return try result.smartCropped(width: boxWidth, height: boxHeight, strategy: strategy)
      case .gravity(let gravity):
        let origin = gravity.origin(width: boxWidth, height: boxHeight, inWidth: result.width, height: result.height)
        return try result.cropped(x: origin.x, y: origin.y, width: boxWidth, height: boxHeight)
      }
    case .center:
      let gravity: Gravity
      if case .gravity(let chosen) = anchor { gravity = chosen } else { gravity = .centre }
      return try result.placed(
        inWidth: width ?? result.width, height: height ?? result.height, gravity: gravity, background: background)
    }
  }
}
