import CVips
import CVipsShim
import DarkroomCore

/// Where to anchor a crop or a pad within a larger area.
///
/// ```swift
/// Gravity.southeast.origin(width: 100, height: 50, inWidth: 400, height: 300)   // (x: 300, y: 250)
/// Resizer(width: 256, height: 256, mode: .fill, crop: .gravity(.north))
/// ```
public enum Gravity: String, Sendable, Hashable, Codable, CaseIterable {
  case centre, north, northeast, east, southeast, south, southwest, west, northwest

  var direction: VipsCompassDirection {
    switch self {
    case .centre: VIPS_COMPASS_DIRECTION_CENTRE
    case .north: VIPS_COMPASS_DIRECTION_NORTH
    case .northeast: VIPS_COMPASS_DIRECTION_NORTH_EAST
    case .east: VIPS_COMPASS_DIRECTION_EAST
    case .southeast: VIPS_COMPASS_DIRECTION_SOUTH_EAST
    case .south: VIPS_COMPASS_DIRECTION_SOUTH
    case .southwest: VIPS_COMPASS_DIRECTION_SOUTH_WEST
    case .west: VIPS_COMPASS_DIRECTION_WEST
    case .northwest: VIPS_COMPASS_DIRECTION_NORTH_WEST
    }
  }

  /// The top-left corner of a `width`×`height` box anchored in an `areaWidth`×`areaHeight` area.
  public func origin(width: Int, height: Int, inWidth areaWidth: Int, height areaHeight: Int) -> (x: Int, y: Int) {
    let spareX = areaWidth - width
    let spareY = areaHeight - height
    let x: Int
    let y: Int
    switch self {
    case .west, .northwest, .southwest: x = 0
    case .east, .northeast, .southeast: x = spareX
    default: x = spareX / 2
    }
    switch self {
    case .north, .northwest, .northeast: y = 0
    case .south, .southwest, .southeast: y = spareY
    default: y = spareY / 2
    }
    return (x, y)
  }
}

/// How a smart crop chooses the interesting part of an image.
///
/// ```swift
/// Cropper(.smart(width: 256, height: 256, strategy: .attention))
/// Resizer(width: 256, height: 256, mode: .fill, crop: .smart(.entropy))
/// ```
public enum SmartCropStrategy: String, Sendable, Hashable, Codable, CaseIterable {
  /// Looks for skin tones, saturated colour and edges (libvips `attention`).
  case attention
  /// Keeps the region with the most detail (libvips `entropy`).
  case entropy

  var interesting: VipsInteresting {
    self == .attention ? VIPS_INTERESTING_ATTENTION : VIPS_INTERESTING_ENTROPY
  }
}

/// A resampling kernel.
///
/// ```swift
/// Resizer(width: 64, height: 64, kernel: .nearest)   // hard pixel edges, for pixel art
/// let half = try image.resized(horizontal: 0.5, vertical: 0.5, kernel: .lanczos3)
/// ```
public enum ResizeKernel: String, Sendable, Hashable, Codable, CaseIterable {
  case nearest, linear, cubic, mitchell, lanczos2, lanczos3

  var vipsKernel: VipsKernel {
    switch self {
    case .nearest: VIPS_KERNEL_NEAREST
    case .linear: VIPS_KERNEL_LINEAR
    case .cubic: VIPS_KERNEL_CUBIC
    case .mitchell: VIPS_KERNEL_MITCHELL
    case .lanczos2: VIPS_KERNEL_LANCZOS2
    case .lanczos3: VIPS_KERNEL_LANCZOS3
    }
  }
}

extension VipsImage {
  /// Rotates and flips according to the EXIF orientation, and resets the tag.
  public func autorotated() throws(PipelineError) -> VipsImage {
    guard orientation != 1 else { return self }
    return try derive("applying the EXIF orientation") { dr_autorot($0, $1) }
  }

  /// Converts to sRGB using the embedded ICC profile (or the built-in CMYK profile for CMYK
  /// images without one); other colour spaces are converted without profiles.
  public func convertedToSRGB() throws(PipelineError) -> VipsImage {
    let space = interpretation
    if hasICCProfile {
      do {
        return try derive("converting the embedded colour profile to sRGB") { dr_icc_to_srgb($0, 1, nil, $1) }
      } catch {
        // A broken embedded profile: fall back to a plain conversion rather than fail the image.
        return try plainSRGB()
      }
    }
    if space == VIPS_INTERPRETATION_CMYK {
      return try derive("converting CMYK to sRGB") { dr_icc_to_srgb($0, 0, "cmyk", $1) }
    }
    return try plainSRGB()
  }

  private func plainSRGB() throws(PipelineError) -> VipsImage {
    let space = interpretation
    let standard = [VIPS_INTERPRETATION_sRGB, VIPS_INTERPRETATION_B_W, VIPS_INTERPRETATION_RGB16, VIPS_INTERPRETATION_GREY16]
    if standard.contains(space) { return self }
    if bands < 3, space == VIPS_INTERPRETATION_MULTIBAND || space == VIPS_INTERPRETATION_MATRIX {
      return try derive("converting to greyscale") { dr_colourspace($0, VIPS_INTERPRETATION_B_W, $1) }
    }
    return try derive("converting to sRGB") { dr_colourspace($0, VIPS_INTERPRETATION_sRGB, $1) }
  }

  /// Converts to 8-bit sRGB (or 8-bit greyscale), as most encoders need.
  public func eightBitSRGB(keepGrey: Bool = true) throws(PipelineError) -> VipsImage {
    let space = interpretation
    let grey = space == VIPS_INTERPRETATION_B_W || space == VIPS_INTERPRETATION_GREY16
    let target = grey && keepGrey ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB
    var image = self
    if space != target || bandFormat != VIPS_FORMAT_UCHAR {
      image = try derive("converting to 8-bit") { dr_colourspace($0, target, $1) }
    }
    if image.bandFormat != VIPS_FORMAT_UCHAR {
      image = try image.derive("converting to 8-bit") { dr_cast($0, VIPS_FORMAT_UCHAR, $1) }
    }
    return image
  }

  /// The area at `x`, `y` of size `width`×`height`, clamped to the image.
  public func cropped(x: Int, y: Int, width: Int, height: Int) throws(PipelineError) -> VipsImage {
    let left = min(max(0, x), self.width - 1)
    let top = min(max(0, y), self.height - 1)
    let w = max(1, min(width, self.width - left))
    let h = max(1, min(height, self.height - top))
    if left == 0, top == 0, w == self.width, h == self.height { return self }
    return try derive("cropping") { dr_crop($0, Int32(left), Int32(top), Int32(w), Int32(h), $1) }
  }

  /// The most interesting `width`×`height` area.
  ///
  /// A smart crop reads its input twice (once, shrunk, to score the areas; then the chosen area),
  /// which a sequentially loaded image cannot do ("out of order read"): the input is decoded into
  /// memory first (bounded by the decoder's maxPixels; free when it already is in memory).
  public func smartCropped(width: Int, height: Int, strategy: SmartCropStrategy) throws(PipelineError) -> VipsImage {
    let w = max(1, min(width, self.width))
    let h = max(1, min(height, self.height))
    if w == self.width, h == self.height { return self }
    let source = try materialized()
    return try source.derive("smart cropping") { dr_smartcrop($0, Int32(w), Int32(h), strategy.interesting, $1) }
  }

  /// Places the image in a `width`×`height` box at `gravity`, cropping what sticks out and padding
  /// with `background` (one value per band) where it does not reach.
  public func placed(inWidth width: Int, height: Int, gravity: Gravity, background: [Double]) throws(PipelineError) -> VipsImage {
    if width == self.width, height == self.height { return self }
    let values = bandValues(background)
    return try values.withUnsafeBufferPointer { buffer throws(PipelineError) in
      try derive("padding") {
        dr_gravity($0, gravity.direction, Int32(width), Int32(height), buffer.baseAddress, Int32(buffer.count), $1)
      }
    }
  }

  /// An RGBA colour (0…255 values) as this image's band values: its luminance for greyscale, its
  /// alpha only when the image has an alpha band, scaled to the image's samples.
  func bandValues(_ colour: [Double]) -> [Double] {
    var values = colour
    if bands <= 2, values.count >= 3 {
      // Greyscale: the colour's luminance, then its alpha.
      let grey = 0.2126 * values[0] + 0.7152 * values[1] + 0.0722 * values[2]
      values = [grey] + values.dropFirst(3)
    }
    while values.count < bands { values.append(values.last ?? 0) }
    return Array(values.prefix(bands)).map { $0 * sampleScale }
  }

  /// Resamples by independent horizontal and vertical factors, premultiplying alpha so that
  /// transparent pixels do not bleed into visible ones.
  public func resized(horizontal: Double, vertical: Double, kernel: ResizeKernel) throws(PipelineError) -> VipsImage {
    if horizontal == 1, vertical == 1 { return self }
    return try premultiplied("resizing") { image throws(PipelineError) in
      try image.derive("resizing") { dr_resize($0, horizontal, vertical, kernel.vipsKernel, $1) }
    }
  }

  /// The image resized through libvips' `vips_resize` alone, without Darkroom's vectorised
  /// horizontal reduce (for comparison: the two give the same bytes).
  package func resizedByLibvips(horizontal: Double, vertical: Double, kernel: ResizeKernel) throws(PipelineError)
    -> VipsImage
  {
    try derive("resizing") { dr_resize_vips($0, horizontal, vertical, kernel.vipsKernel, $1) }
  }

  /// The image reduced horizontally by `shrink` as libvips' `reduceh` does with a gap of 2:
  /// through Darkroom's vectorised loop where it takes the image, or through libvips' own
  /// (`libvips`, for comparison).
  package func reducedHorizontally(by shrink: Double, kernel: ResizeKernel, libvips: Bool = false) throws(PipelineError)
    -> VipsImage
  {
    try derive("reducing") {
      libvips ? dr_reduceh_vips($0, shrink, kernel.vipsKernel, $1) : dr_reduceh($0, shrink, kernel.vipsKernel, $1)
    }
  }

  /// Whether Darkroom's vectorised horizontal reduce takes this image with `kernel` (8-bit, one
  /// or three bands, a Lanczos kernel, a CPU with SSSE3); otherwise libvips' own runs.
  package func takesVectorisedReduce(kernel: ResizeKernel) -> Bool { dr_reduceh_takes(pointer, kernel.vipsKernel) != 0 }

  /// What one 8-bit step (0…255 colour values) is in this image's samples: 257 for 16-bit, 1/255
  /// for float (scRGB 0…1), 1 for 8-bit.
  var sampleScale: Double {
    switch bandFormat {
    case VIPS_FORMAT_USHORT, VIPS_FORMAT_SHORT: 257
    case VIPS_FORMAT_FLOAT, VIPS_FORMAT_DOUBLE: 1.0 / 255
    default: 1
    }
  }

  /// Composes the image over a solid background (0…255 values), dropping alpha.
  public func flattened(background: [Double]) throws(PipelineError) -> VipsImage {
    guard hasAlpha else { return self }
    var values = background
    let colourBands = bands - 1
    while values.count < colourBands { values.append(values.last ?? 255) }
    values = Array(values.prefix(colourBands)).map { $0 * sampleScale }
    return try values.withUnsafeBufferPointer { buffer throws(PipelineError) in
      try derive("flattening alpha") { dr_flatten($0, buffer.baseAddress, Int32(buffer.count), $1) }
    }
  }
}
