import DarkroomCore

/// The output format and its settings, for ``ImageEncoder``.
///
/// ```swift
/// ImageEncoder(.jpeg(quality: 85, progressive: true))
/// ImageEncoder(.webp(quality: 80))
/// ImageEncoder(.auto)   // the source's format (TIFF and HEIF become PNG and AVIF)
/// ```
public indirect enum EncodeFormat: Sendable, Hashable {
  /// JPEG; alpha is flattened onto the background.
  case jpeg(quality: Int = 80, progressive: Bool = false)
  /// PNG; `compression` 0…9; `palette` quantises to at most 256 colours (with `quality`).
  case png(compression: Int = 6, palette: Bool = false, quality: Int = 100)
  /// WebP, lossy or lossless; `effort` 0…6.
  case webp(quality: Int = 80, lossless: Bool = false, effort: Int = 4)
  /// AVIF (AV1 in HEIF); `effort` 0…9.
  case avif(quality: Int = 50, lossless: Bool = false, effort: Int = 4)
  /// GIF (every frame of an animation); `effort` 1…10 of the quantiser.
  case gif(effort: Int = 7)
  /// The source format: JPEG, PNG, WebP and GIF stay; HEIF/AVIF become AVIF; TIFF becomes PNG.
  /// `quality`, `lossless` and `effort` apply where the chosen format has them (else its defaults).
  case auto(quality: Int? = nil, lossless: Bool = false, effort: Int? = nil)
  /// JPEG, or PNG when the image has alpha: what an image server answers a client that accepts
  /// neither AVIF nor WebP (`format: "auto"` in `darkroom serve`). `quality` is the JPEG's.
  case jpegOrPNG(quality: Int = 80)
  /// `still` for a still image, `animated` for an animation: what an image server answers when it
  /// chose a format before knowing whether the source moves (an animated GIF asked for as AVIF
  /// or JPEG comes back as GIF, still animated).
  case stillOrAnimated(still: EncodeFormat, animated: EncodeFormat)

  /// The source format with every format's defaults.
  public static var auto: EncodeFormat { .auto() }

  /// The concrete format for an image decoded from `source` (resolves `.auto`, `.jpegOrPNG` by
  /// whether the image has alpha, and `.stillOrAnimated` by whether it is an animation).
  public func resolved(for source: ImageFormat, hasAlpha: Bool = false, animated: Bool = false) -> EncodeFormat {
    if case .stillOrAnimated(let still, let moving) = self {
      return (animated ? moving : still).resolved(for: source, hasAlpha: hasAlpha, animated: animated)
    }
    if case .jpegOrPNG(let quality) = self { return hasAlpha ? .png() : .jpeg(quality: quality) }
    guard case .auto(let quality, let lossless, let effort) = self else { return self }
    switch source {
    case .jpeg: return .jpeg(quality: quality ?? 80)
    case .webp: return .webp(quality: quality ?? 80, lossless: lossless, effort: effort ?? 4)
    case .gif: return .gif(effort: effort ?? 7)
    case .heif, .avif: return .avif(quality: quality ?? 50, lossless: lossless, effort: effort ?? 4)
    default: return .png()
    }
  }

  /// Whether this writes one image whatever it is given (JPEG, PNG, AVIF): an animation's first
  /// frame. `.auto` and `.stillOrAnimated` may keep an animation.
  public var holdsOneFrame: Bool {
    switch self {
    case .jpeg, .png, .avif, .jpegOrPNG: true
    case .webp, .gif, .auto, .stillOrAnimated: false
    }
  }

  /// The file format this writes (`nil` for `.auto` and `.jpegOrPNG`).
  public var imageFormat: ImageFormat? {
    switch self {
    case .jpeg: .jpeg
    case .png: .png
    case .webp: .webp
    case .avif: .avif
    case .gif: .gif
    case .auto, .jpegOrPNG, .stillOrAnimated: nil
    }
  }

  public var identifier: String {
    switch self {
    case .jpeg(let q, let p): "jpeg(q=\(q),progressive=\(p))"
    case .png(let c, let p, let q): "png(compression=\(c),palette=\(p),q=\(q))"
    case .webp(let q, let l, let e): "webp(q=\(q),lossless=\(l),effort=\(e))"
    case .avif(let q, let l, let e): "avif(q=\(q),lossless=\(l),effort=\(e))"
    case .gif(let e): "gif(effort=\(e))"
    case .auto(let q, let l, let e):
      "auto(q=\(q.map(String.init) ?? "default"),lossless=\(l),effort=\(e.map(String.init) ?? "default"))"
    case .jpegOrPNG(let q): "jpeg-or-png(q=\(q))"
    case .stillOrAnimated(let still, let animated): "\(still.identifier)|animated:\(animated.identifier)"
    }
  }
}
