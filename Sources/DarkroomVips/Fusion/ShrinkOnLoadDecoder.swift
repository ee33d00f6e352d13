import DarkroomCore

extension ImageDecoder: FusibleStage {
  /// Fuses `decode → resize` and `decode → crop (relative) → resize` into one stage that loads
  /// the image at reduced size.
  package func fused(with following: ArraySlice<AnyStage>) -> FusedStage? {
    guard !share else { return nil }  // a shared live image is the full decode, kept in memory
    var rest = following
    var crop: Cropper?
    if let candidate = rest.first?.base as? Cropper, case .relative = candidate.region {
      crop = candidate
      rest = rest.dropFirst()
    }
    guard let resizer = rest.first?.base as? Resizer else { return nil }
    // An encoder to a format that holds one image needs one frame: the others are not decoded.
    let encoder = rest.dropFirst().lazy.compactMap { $0.base as? ImageEncoder }.first
    var stage = ShrinkOnLoadDecoder(decoder: self, crop: crop, resizer: resizer)
    stage.firstFrameOnly = encoder.map { $0.format.holdsOneFrame } ?? false
    let kinds = [ImageDecoder.kind] + (crop == nil ? [] : [Cropper.kind]) + [Resizer.kind]
    return FusedStage(
      AnyStage(stage, kind: kinds.joined(separator: "+"), identifier: stage.identifier, fusedKinds: kinds),
      absorbing: kinds.count - 1)
  }
}

/// A decoder fused with the (relative) crop and the resize after it: it reads the header, works
/// out how much smaller the output is, and asks the loader to decode at reduced size — JPEG DCT
/// scaling by 2, 4 or 8 chosen like sharp does (keeping at least a little of the reduction for
/// the final, high-quality resample), WebP scaled decoding — then applies orientation, crop and
/// the residual resize to exactly the size the unfused stages would produce.
package struct ShrinkOnLoadDecoder: Stage {
  public static let kind = "decode+resize"

  public let decoder: ImageDecoder
  public let crop: Cropper?
  public let resizer: Resizer
  /// The pipeline's encoder writes a format that holds one image: an animation's first frame is
  /// the only one decoded.
  public var firstFrameOnly = false
  /// A JPEG's rows may be reduced as they are decoded (decision 0017); off, the whole decode is
  /// resized, for comparison: the two give the same bytes.
  package var reducesRows = true

  public init(decoder: ImageDecoder, crop: Cropper?, resizer: Resizer) {
    (self.decoder, self.crop, self.resizer) = (decoder, crop, resizer)
  }

  public var identifier: String {
    [decoder.identifier, crop?.identifier, resizer.identifier, firstFrameOnly ? "first-frame" : nil].compactMap { $0 }
      .joined(separator: "|")
  }

  public func process(_ input: FetchedData, context: StageContext) async throws -> DecodedImage {
    let decoded = try await VipsKillScope.blocking(context) { try run(input) }
    decoder.noteFirstFrame(of: decoded, context: context)
    return decoded
  }

  /// The JPEG/WebP shrink factor for reducing by `shrink` (sharp's rule).
  public static func loadShrink(for shrink: Double) -> Int {
    var factor = 1
    if shrink >= 8 { factor = 8 } else if shrink >= 4 { factor = 4 } else if shrink >= 2 { factor = 2 }
    if factor > 1, Int(shrink) == factor { factor /= 2 }
    return factor
  }

  func run(_ input: FetchedData) throws(PipelineError) -> DecodedImage {
    var decoder = decoder
    if firstFrameOnly { decoder.animated = false }
    let header = try decoder.loadHeader(input)
    if header.image.isAnimated {
      // Every frame at full size, then the stages as they run unfused (GIF has no shrink-on-load).
      var decoded = try decoder.finish(
        header.image, format: header.format, input: input, width: header.image.width, height: header.image.frameHeight)
      if let crop { decoded = try crop.crop(decoded) }
      return try resizer.resize(decoded)
    }
    let fullWidth = header.image.width
    let fullHeight = header.image.height
    let orientation = decoder.autoRotate ? header.image.orientation : 1
    let swaps = (5...8).contains(orientation)
    let uprightWidth = swaps ? fullHeight : fullWidth
    let uprightHeight = swaps ? fullWidth : fullHeight
    var cropWidth = uprightWidth
    var cropHeight = uprightHeight
    if let rect = crop?.region.rectangle(inWidth: uprightWidth, height: uprightHeight) {
      cropWidth = rect.width
      cropHeight = rect.height
    }
    let target = resizer.scaledSize(inputWidth: cropWidth, inputHeight: cropHeight)
    let storedTarget = swaps ? (width: target.height, height: target.width) : target
    let shrink = min(Double(cropWidth) / Double(target.width), Double(cropHeight) / Double(target.height))
    let factor = ShrinkOnLoadDecoder.loadShrink(for: shrink)
    var loaded = header.image
    var scale = 1.0
    var jpegShrink = 1
    // The extent the loaded pixels cover, when it is not their count (a direct JPEG decode that
    // kept its partial edge; with a relative crop it never does).
    var extent: (width: Double, height: Double)?
    // The loaded image's rows are reduced already (a direct JPEG decode reducing as it goes).
    var rowsReduced = false
    if factor > 1 {
      switch header.format {
      case .jpeg:
        let eighths = DirectJPEG.eighths(width: cropWidth, height: cropHeight, covering: target)
        let jpeg = try loadJPEG(input, header: header.image, eighths: eighths, factor: factor, target: storedTarget)
        (loaded, extent, rowsReduced, jpegShrink) = (jpeg.image, jpeg.extent, jpeg.rowsReduced, jpeg.shrink)
      case .webp:
        scale = 1 / Double(factor)
        loaded = try ImageDecoder.load(.webp, from: input.bytes, source: input.source, scale: scale)
      case .heif, .avif:
        // Use the embedded thumbnail when it is still at least as large as the output needs.
        let thumbnail = try? ImageDecoder.load(header.format, from: input.bytes, source: input.source, thumbnail: true)
        if let thumbnail, thumbnail.width < fullWidth,
          Double(thumbnail.width) / Double(fullWidth) * Double(cropWidth) >= Double(swaps ? target.height : target.width),
          Double(thumbnail.height) / Double(fullHeight) * Double(cropHeight) >= Double(swaps ? target.width : target.height)
        {
          loaded = thumbnail
        }
      default:
        break
      }
    }
    // Crop and scale in the stored orientation, then turn the small result upright: rotating a
    // thumbnail is cheap, rotating the full image is not.
    let image = try decoder.finish(
      loaded, format: header.format, input: input, width: fullWidth, height: fullHeight, shrink: jpegShrink, scale: scale,
      rotate: false)
    var pixels = image.image
    if case .relative(let x, let y, let w, let h)? = crop?.region {
      let stored = Orientation.storedRect(x: x, y: y, width: w, height: h, orientation: orientation)
      let rect = CropRegion.relative(x: stored.x, y: stored.y, width: stored.width, height: stored.height)
        .rectangle(inWidth: pixels.width, height: pixels.height)
      if let rect { pixels = try pixels.cropped(x: rect.x, y: rect.y, width: rect.width, height: rect.height) }
    }
    pixels = try resizer.apply(to: pixels, scaledTo: storedTarget, from: extent, rowsReduced: rowsReduced, finishing: false)
    if orientation != 1 {
      // Turning and vertical flips read their input out of order, and the loader reads the file
      // sequentially ("out of order read"): hold the shrunk image in memory first, as
      // vips_thumbnail does. It is already about the output's size.
      pixels = try pixels.materialized().autorotated()
    }
    pixels = try resizer.apply(to: pixels, scaledTo: target)
    return resizer.keepingColours(image, pixels)
  }

  /// The JPEG loaded for a reduction: decoded straight through libjpeg at `eighths`/8 with its
  /// rows reduced as they come, or whole, or else by libvips' loader at `factor`. With the image:
  /// the extent its pixels cover when that is not their count, whether its rows are reduced to
  /// `target`'s height (stored orientation) already, and the shrink it was loaded at.
  func loadJPEG(_ input: FetchedData, header: VipsImage, eighths: Int, factor: Int, target: (width: Int, height: Int))
    throws(PipelineError) -> (image: VipsImage, extent: (width: Double, height: Double)?, rowsReduced: Bool, shrink: Int)
  {
    if eighths <= 4 {
      var failed = false
      if crop == nil, reducesRows {
        switch reducedDecode(input, header: header, eighths: eighths, target: target) {
        case .decoded(let reduced): return (reduced.image, reduced.extent, true, 8 / eighths)
        case .failed: failed = true  // the whole decode would fail the same way
        case .declined: break
        }
      }
      if !failed, let direct = DirectJPEG.load(input, header: header, eighths: eighths) {
        let prepared = try DirectJPEG.prepared(
          direct, width: header.width, height: header.height, eighths: eighths, cropping: crop != nil)
        return (prepared.image, crop == nil ? prepared.extent : nil, false, 8 / eighths)
      }
    }
    return (try ImageDecoder.load(.jpeg, from: input.bytes, source: input.source, shrink: factor), nil, false, factor)
  }

  /// What decoding the JPEG at `eighths`/8 with its rows reduced to `target`'s height (stored
  /// orientation) gave: the image and the extent its pixels cover, when the resize that follows
  /// would reduce both ways from the decode's true extent with a Lanczos kernel.
  ///
  /// It gives the bytes the whole decode and the resize would: the scales are the ones
  /// ``Resizer/apply(to:scaledTo:from:rowsReduced:finishing:)`` takes from the extent (a decode
  /// keeps its partial last row and column when each side has at least
  /// ``DirectJPEG/minSideKeepingEdge`` pixels), and the image is not converted between the decode
  /// and the resize (an embedded colour profile to convert declines).
  package func reducedDecode(_ input: FetchedData, header: VipsImage, eighths: Int, target: (width: Int, height: Int))
    -> DirectJPEG.Outcome<(image: VipsImage, extent: (width: Double, height: Double))>
  {
    let width = header.width
    let height = header.height
    // libjpeg's scaled size: each side × M/8, rounded up.
    guard (min(width, height) * eighths + 7) / 8 >= DirectJPEG.minSideKeepingEdge else { return .declined }
    guard !(decoder.convertToSRGB && header.hasICCProfile) else { return .declined }
    let extent = DirectJPEG.extent(width: width, height: height, eighths: eighths)
    let horizontal = Double(target.width) / extent.width
    let vertical = Double(target.height) / extent.height
    guard horizontal < 1, vertical < 1 else { return .declined }
    // The rows are the output's already: their extent is their count.
    return DirectJPEG.loadReduced(input, header: header, eighths: eighths, vertical: vertical, kernel: resizer.kernel)
      .map { image in (image, (extent.width, Double(image.height))) }
  }
}

/// EXIF orientation geometry.
enum Orientation {
  /// Maps a relative rectangle on the upright image to the same area on the stored image.
  static func storedRect(x: Double, y: Double, width w: Double, height h: Double, orientation: Int) -> (
    x: Double, y: Double, width: Double, height: Double
  ) {
    switch orientation {
    case 2: (1 - x - w, y, w, h)
    case 3: (1 - x - w, 1 - y - h, w, h)
    case 4: (x, 1 - y - h, w, h)
    case 5: (y, x, h, w)
    case 6: (y, 1 - x - w, h, w)
    case 7: (1 - y - h, 1 - x - w, h, w)
    case 8: (1 - y - h, x, h, w)
    default: (x, y, w, h)
    }
  }
}
