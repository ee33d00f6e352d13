import CVips
import CVipsShim
import DarkroomCore

/// A quarter turn, clockwise.
///
/// ```swift
/// let upright = try image.rotated(by: .quarter)   // a 400×300 image becomes 300×400
/// ```
public enum RotationAngle: Int, Sendable, Hashable, Codable, CaseIterable {
  /// 90° clockwise.
  case quarter = 90
  /// 180°.
  case half = 180
  /// 270° clockwise (90° counter-clockwise).
  case threeQuarters = 270

  var vipsAngle: VipsAngle {
    switch self {
    case .quarter: VIPS_ANGLE_D90
    case .half: VIPS_ANGLE_D180
    case .threeQuarters: VIPS_ANGLE_D270
    }
  }
}

/// The corner whose pixel gives a trim its border's colour.
///
/// ```swift
/// let inner = try image.trimmed(corner: .bottomRight)
/// ```
public enum TrimCorner: String, Sendable, Hashable, Codable, CaseIterable {
  case topLeft = "top-left"
  case bottomRight = "bottom-right"
}

/// Which way a flip mirrors an image.
///
/// ```swift
/// let mirrored = try image.flipped(.horizontal)   // left and right swapped
/// ```
public enum FlipDirection: String, Sendable, Hashable, Codable, CaseIterable {
  /// Left and right swapped.
  case horizontal
  /// Top and bottom swapped.
  case vertical
  /// Both: the same as a half turn.
  case both
}

extension VipsImage {
  /// The largest Gaussian sigma ``blurred(sigma:)`` takes: its mask grows with sigma (about six
  /// sigmas wide), and so does the work per pixel.
  public static let maxBlurSigma = 100.0
  /// The largest sigma ``sharpened(sigma:amount:)`` takes.
  public static let maxSharpenSigma = 10.0
  /// The largest amount ``sharpened(sigma:amount:)`` takes.
  public static let maxSharpenAmount = 20.0

  /// Turned clockwise by `angle`.
  ///
  /// A turn reads its input out of the order a sequential loader delivers it ("out of order
  /// read"), so the image is held in memory first (as the decoder does for an EXIF turn; free
  /// when it is in memory already, and small after a resize).
  public func rotated(by angle: RotationAngle) throws(PipelineError) -> VipsImage {
    try materialized().derive("rotating") { dr_rot($0, angle.vipsAngle, $1) }
  }

  /// Mirrored `direction`-wise. A vertical flip, like a turn, holds the image in memory first;
  /// a horizontal one streams.
  public func flipped(_ direction: FlipDirection) throws(PipelineError) -> VipsImage {
    switch direction {
    case .horizontal: try derive("flipping") { dr_flip($0, VIPS_DIRECTION_HORIZONTAL, $1) }
    case .vertical: try materialized().derive("flipping") { dr_flip($0, VIPS_DIRECTION_VERTICAL, $1) }
    case .both: try rotated(by: .half)
    }
  }

  /// In shades of grey (luminance), alpha kept; 16-bit images stay 16-bit.
  public func greyscaled() throws(PipelineError) -> VipsImage {
    let space = interpretation
    if space == VIPS_INTERPRETATION_B_W || space == VIPS_INTERPRETATION_GREY16 { return self }
    let grey = bandFormat == VIPS_FORMAT_USHORT ? VIPS_INTERPRETATION_GREY16 : VIPS_INTERPRETATION_B_W
    return try derive("converting to greyscale") { dr_colourspace($0, grey, $1) }
  }

  /// Blurred by a Gaussian of standard deviation `sigma` pixels (0 < sigma ≤ ``maxBlurSigma``),
  /// alpha premultiplied so that transparent pixels do not bleed their colour.
  public func blurred(sigma: Double) throws(PipelineError) -> VipsImage {
    guard sigma.isFinite, sigma > 0, sigma <= Self.maxBlurSigma else {
      throw PipelineError(.invalidInput, "a blur's sigma is over 0 and at most \(Self.maxBlurSigma), not \(sigma)")
    }
    // libvips' approximation above sigma 10: a tenth of the time at sigma 100, within 2 levels.
    let approximate: Int32 = sigma > 10 ? 1 : 0
    return try convolution { source throws(PipelineError) in
      try source.premultiplied("blurring") { image throws(PipelineError) in
        try image.derive("blurring") { dr_gaussblur($0, sigma, approximate, $1) }
      }
    }
  }

  /// The metadata mark of an image a convolution made (kept by the images derived from it).
  static let convolvedMark = "darkroom-convolved"

  /// Whether a convolution (blur, sharpen) made this image or one it derives from.
  package var isConvolved: Bool { dr_marked(pointer, Self.convolvedMark) != 0 }

  /// `operation` (a convolution) on this image, held in memory first when a convolution made it:
  /// each convolution asks its input for its region and a margin, and along a lazy chain the
  /// margins compound (16 sharpens in a row took 0.8 GB on a 6 MP photo, 64 took 12 GB). Held,
  /// each works from one image in memory.
  func convolution(_ operation: (VipsImage) throws(PipelineError) -> VipsImage) throws(PipelineError) -> VipsImage {
    let source = isConvolved ? try materialized() : self
    let result = try operation(source)
    dr_mark(result.pointer, Self.convolvedMark)
    return result
  }

  /// Sharpened (libvips' unsharp mask on lightness): edges `sigma` pixels wide gain contrast by
  /// `amount` (0 leaves the image as it is).
  public func sharpened(sigma: Double, amount: Double) throws(PipelineError) -> VipsImage {
    guard sigma.isFinite, sigma > 0, sigma <= Self.maxSharpenSigma else {
      throw PipelineError(.invalidInput, "a sharpen's sigma is over 0 and at most \(Self.maxSharpenSigma), not \(sigma)")
    }
    guard amount.isFinite, amount >= 0, amount <= Self.maxSharpenAmount else {
      throw PipelineError(.invalidInput, "a sharpen's amount is 0 to \(Self.maxSharpenAmount), not \(amount)")
    }
    if amount == 0 { return self }
    return try convolution { source throws(PipelineError) in
      guard source.hasAlpha else { return try source.derive("sharpening") { dr_sharpen($0, sigma, amount, $1) } }
      // libvips sends extra bands through LabS and back, which cut 16-bit alpha to multiples of
      // 256 (opaque came out 65280): the colour is sharpened alone and the alpha put back.
      let (colour, alpha) = try source.colourAndAlpha()
      let sharp = try colour.derive("sharpening") { dr_sharpen($0, sigma, amount, $1) }
      return try sharp.cast(to: source.bandFormat).joined(alpha, "joining the alpha")
    }
  }

  /// The largest side ``extended(top:right:bottom:left:background:)`` makes.
  public static let maxExtendedSide = 65_535

  /// Padded with `background` (RGBA, 0…255) by the given numbers of pixels on each side; an
  /// image without alpha gains it when the colour is not opaque. The result's sides are at most
  /// ``maxExtendedSide``.
  public func extended(top: Int, right: Int, bottom: Int, left: Int, background: [Double]) throws(PipelineError)
    -> VipsImage
  {
    let sides = [top, right, bottom, left]
    guard sides.allSatisfy({ (0...Self.maxExtendedSide).contains($0) }) else {
      throw PipelineError(.invalidInput, "padding is 0 to \(Self.maxExtendedSide) pixels a side, not \(sides)")
    }
    let width = self.width + left + right
    let height = self.height + top + bottom
    guard width <= Self.maxExtendedSide, height <= Self.maxExtendedSide else {
      throw PipelineError(
        .imageTooLarge, "padding makes a \(width)×\(height) image; each side can be at most \(Self.maxExtendedSide)")
    }
    if sides.allSatisfy({ $0 == 0 }) { return self }
    var image = self
    if !hasAlpha, background.count > 3, background[3] < 255 {
      image = try derive("adding alpha") { dr_addalpha($0, $1) }
    }
    let values = image.bandValues(background)
    return try values.withUnsafeBufferPointer { buffer throws(PipelineError) in
      try image.derive("padding") {
        dr_embed($0, Int32(left), Int32(top), Int32(width), Int32(height), buffer.baseAddress, Int32(buffer.count), $1)
      }
    }
  }

  /// Without its uniform border: the largest box whose edges differ from `background` (RGB,
  /// 0…255; the pixel at `corner` when `nil`) by more than `threshold` (0…255) is kept, after
  /// libvips' median filter (so that noise and JPEG ringing are not content). Alpha is flattened
  /// onto white to find the box, and kept in the result. An image that is all border, or under
  /// 3×3 pixels, is returned as it is.
  public func trimmed(threshold: Double = 10, background: [Double]? = nil, corner: TrimCorner = .topLeft)
    throws(PipelineError) -> VipsImage
  {
    try Self.checkTrimThreshold(threshold)
    guard width >= 3, height >= 3 else { return self }
    // Read twice (to find the box, then to crop it): held in memory first.
    let source = try materialized()
    guard let box = try source.trimBox(threshold: threshold, background: background, corner: corner) else { return source }
    return try source.cropped(x: box.x, y: box.y, width: box.width, height: box.height)
  }

  static func checkTrimThreshold(_ threshold: Double) throws(PipelineError) {
    guard threshold.isFinite, (0...255).contains(threshold) else {
      throw PipelineError(.invalidInput, "a trim's threshold is 0 to 255, not \(threshold)")
    }
  }

  /// The box ``trimmed(threshold:background:corner:)`` keeps, or `nil` when the image is all border.
  func trimBox(threshold: Double, background: [Double]?, corner: TrimCorner) throws(PipelineError)
    -> (x: Int, y: Int, width: Int, height: Int)?
  {
    try Self.checkTrimThreshold(threshold)
    let source = self
    let flat = try source.flattened(background: [255, 255, 255])
    let colour: [Double]
    if let background {
      colour = flat.bandValues(background)
    } else {
      colour = corner == .topLeft ? try flat.point(x: 0, y: 0) : try flat.point(x: flat.width - 1, y: flat.height - 1)
    }
    var (left, top, width, height): (Int32, Int32, Int32, Int32) = (0, 0, 0, 0)
    let found = colour.withUnsafeBufferPointer { buffer in
      dr_find_trim(
        flat.pointer, threshold * flat.sampleScale, buffer.baseAddress, Int32(buffer.count), &left, &top, &width, &height)
    }
    guard found == 0 else {
      let cause = Vips.captureError()
      throw PipelineError(.processingFailed, "finding the border to trim failed: \(cause.text)", cause: cause)
    }
    guard width > 0, height > 0 else { return nil }
    return (Int(left), Int(top), Int(width), Int(height))
  }

  /// The largest brightness or saturation factor ``modulated(brightness:saturation:hue:)`` takes.
  public static let maxModulation = 10.0

  /// Brightness and saturation multiplied, and the hue turned by `hue` degrees, in LCh (as
  /// sharp's `modulate` does): 1, 1 and 0 change nothing. Alpha is kept; greyscale images have
  /// no hue or saturation to change, and stay greyscale; 16-bit images stay 16-bit.
  public func modulated(brightness: Double = 1, saturation: Double = 1, hue: Double = 0) throws(PipelineError) -> VipsImage {
    for (name, value) in [("brightness", brightness), ("saturation", saturation)]
    where !value.isFinite || value < 0 || value > Self.maxModulation {
      throw PipelineError(.invalidInput, "a modulate's \(name) is a factor from 0 to \(Self.maxModulation), not \(value)")
    }
    guard hue.isFinite, (-360...360).contains(hue) else {
      throw PipelineError(.invalidInput, "a modulate's hue is -360 to 360 degrees, not \(hue)")
    }
    if brightness == 1, saturation == 1, hue == 0 { return self }
    let space = interpretation
    let grey = space == VIPS_INTERPRETATION_B_W || space == VIPS_INTERPRETATION_GREY16
    let deep = bandFormat == VIPS_FORMAT_USHORT
    let target =
      grey
      ? (deep ? VIPS_INTERPRETATION_GREY16 : VIPS_INTERPRETATION_B_W)
      : (deep ? VIPS_INTERPRETATION_RGB16 : VIPS_INTERPRETATION_sRGB)
    let lch = try derive("converting to LCh") { dr_colourspace($0, VIPS_INTERPRETATION_LCH, $1) }
    // L, C and h, then any other band (alpha) as it is.
    let factors = [brightness, saturation, 1] + Array(repeating: 1.0, count: max(0, lch.bands - 3))
    let offsets = [0, 0, hue] + Array(repeating: 0.0, count: max(0, lch.bands - 3))
    let changed = try lch.linear("modulating", times: factors, plus: offsets)
    let back = try changed.derive("converting back from LCh") { dr_colourspace($0, target, $1) }
    return try back.cast(to: deep ? VIPS_FORMAT_USHORT : VIPS_FORMAT_UCHAR)
  }

  /// With its corners cut round: outside a rounded rectangle of corner radii `rx`, `ry` (pixels;
  /// `nil` for `rx` makes a circle or an ellipse, the largest that fits), the image is
  /// transparent, its edge antialiased. An image without alpha gains it; one with alpha keeps
  /// what was transparent already.
  public func rounded(rx: Double?, ry: Double? = nil) throws(PipelineError) -> VipsImage {
    let (w, h) = (Double(width), Double(height))
    let radiusX = rx ?? w / 2
    let radiusY = ry ?? (rx == nil ? h / 2 : radiusX)
    guard radiusX.isFinite, radiusY.isFinite, radiusX >= 0, radiusY >= 0 else {
      throw PipelineError(.invalidInput, "a corner radius is a number of pixels, 0 or more, not \(radiusX), \(radiusY)")
    }
    if radiusX == 0 || radiusY == 0 { return self }
    let shape = try Self.mask(width: width, height: height, rx: min(radiusX, w / 2), ry: min(radiusY, h / 2))
    // The mask in this image's sample scale: 255, or 65535 for 16-bit.
    let format = bandFormat
    guard hasAlpha else {
      let scaled = sampleScale == 1 ? shape : try shape.linear("scaling the mask", times: [sampleScale], plus: [0])
      return try joined(try scaled.cast(to: format, "casting the mask"), "adding the mask")
    }
    let (colour, alpha) = try colourAndAlpha()
    let product = try alpha.derive("masking the alpha") { dr_multiply($0, shape.pointer, $1) }
    let masked = try product.linear("masking the alpha", times: [1.0 / 255], plus: [0])
    return try colour.joined(try masked.cast(to: format, "casting the alpha"), "joining the alpha")
  }

  /// `self × factors + offsets`, band by band (one value for every band, or one per band), in
  /// float.
  func linear(_ what: String, times factors: [Double], plus offsets: [Double]) throws(PipelineError) -> VipsImage {
    // libvips reads n values from each array: a single value is repeated to the other's length
    // (passing one offset beside four factors read three doubles past the array).
    let count = max(factors.count, offsets.count)
    let a = factors.count == 1 ? Array(repeating: factors[0], count: count) : factors
    let b = offsets.count == 1 ? Array(repeating: offsets[0], count: count) : offsets
    guard count > 0, a.count == count, b.count == count else {
      throw PipelineError(.processingFailed, "\(what): \(factors.count) factors and \(offsets.count) offsets do not match")
    }
    return try a.withUnsafeBufferPointer { a throws(PipelineError) in
      try b.withUnsafeBufferPointer { b throws(PipelineError) in
        try derive(what) { dr_linear($0, a.baseAddress, b.baseAddress, Int32(count), $1) }
      }
    }
  }

  /// In `format`: this image when it is in it already.
  func cast(to format: VipsBandFormat, _ what: String = "restoring the pixel format") throws(PipelineError) -> VipsImage {
    bandFormat == format ? self : try derive(what) { dr_cast($0, format, $1) }
  }

  /// The colour bands and the alpha band (the last), apart.
  func colourAndAlpha() throws(PipelineError) -> (colour: VipsImage, alpha: VipsImage) {
    let colour = try derive("taking the colour bands") { dr_extract_bands($0, 0, Int32(bands - 1), $1) }
    let alpha = try derive("taking the alpha band") { dr_extract_bands($0, Int32(bands - 1), 1, $1) }
    return (colour, alpha)
  }

  /// This image's bands, then `other`'s.
  func joined(_ other: VipsImage, _ what: String) throws(PipelineError) -> VipsImage {
    try derive(what) { image, out in dr_bandjoin2(image, other.pointer, out) }
  }

  /// A `width`×`height` one-band mask, 255 inside a rounded rectangle of radii `rx`, `ry`.
  static func mask(width: Int, height: Int, rx: Double, ry: Double) throws(PipelineError) -> VipsImage {
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    guard dr_rounded_mask(Int32(width), Int32(height), rx, ry, &out) == 0, let out else {
      let cause = Vips.captureError()
      throw PipelineError(.processingFailed, "drawing the rounded mask failed: \(cause.text)", cause: cause)
    }
    return VipsImage(taking: out, keepAlive: [])
  }

  /// The values of the pixel at `x`, `y`, one per band, in the image's own sample scale.
  func point(x: Int, y: Int) throws(PipelineError) -> [Double] {
    var values = [Double](repeating: 0, count: 16)
    var count: Int32 = 0
    let status = values.withUnsafeMutableBufferPointer { dr_getpoint(pointer, Int32(x), Int32(y), $0.baseAddress, 16, &count) }
    guard status == 0 else {
      let cause = Vips.captureError()
      throw PipelineError(.corruptImage, "reading a pixel failed: \(cause.text)", cause: cause)
    }
    return Array(values.prefix(Int(count)))
  }

  /// `operation` on the image with its alpha premultiplied (nothing to do without alpha), then
  /// unpremultiplied and cast back to the image's format.
  func premultiplied(_ what: String, _ operation: (VipsImage) throws(PipelineError) -> VipsImage) throws(PipelineError)
    -> VipsImage
  {
    guard hasAlpha else { return try operation(self) }
    let format = bandFormat
    let premultiplied = try derive("premultiplying alpha") { dr_premultiply($0, $1) }
    let done = try operation(premultiplied)
    let restored = try done.derive("unpremultiplying alpha") { dr_unpremultiply($0, $1) }
    return try restored.cast(to: format)
  }
}
