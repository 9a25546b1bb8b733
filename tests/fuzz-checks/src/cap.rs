//! `cap`: the result cap.

use toolcell::registry::{TRUNCATION_MARKER, cap_result, cap_text};

/// `cap_result` and `cap_text` on `data`: the first two bytes are the cap (little-endian), the
/// rest (UTF-8, lossily) the text. Checks the documented bounds: `cap_result` keeps at most
/// `cap` bytes of the text (so at most `cap + TRUNCATION_MARKER.len()` in all), `cap_text` at
/// most `cap` bytes with the marker; a text of at most `cap` bytes is untouched; a cut text is
/// a prefix of the input, cut on a character boundary no more than 3 bytes short of the room,
/// followed by the marker (or, for `cap_text` with a cap shorter than the marker, as much of
/// the marker as fits).
pub fn check_cap(data: &[u8]) -> Result<(), String> {
    let (cap, text) = match data {
        [low, high, rest @ ..] => (usize::from(u16::from_le_bytes([*low, *high])), rest),
        _ => return Ok(()),
    };
    let text = String::from_utf8_lossy(text);
    let text = text.as_ref();
    let should_cut = text.len() > cap;
    let marker = TRUNCATION_MARKER;

    let (capped, cut) = cap_result(text, cap);
    let why = |what: &str| format!("cap_result({text:?}, {cap}) = {capped:?}: {what}");
    if cut != should_cut {
        return Err(why("cut is wrong"));
    }
    if std::str::from_utf8(capped.as_bytes()).is_err() {
        return Err(why("not UTF-8"));
    }
    if !cut && capped != text {
        return Err(why("changed a text that fits"));
    }
    if cut {
        let kept = capped
            .strip_suffix(marker)
            .ok_or_else(|| why("no marker"))?;
        if !text.starts_with(kept) || kept.len() > cap || cap - kept.len() > 3 {
            return Err(why("not the longest prefix that fits"));
        }
        if capped.len() > cap + marker.len() {
            return Err(why("longer than cap plus marker"));
        }
    }

    let (capped, cut) = cap_text(text, cap);
    let why = |what: &str| format!("cap_text({text:?}, {cap}) = {capped:?}: {what}");
    if cut != should_cut {
        return Err(why("cut is wrong"));
    }
    if capped.len() > cap {
        return Err(why("longer than the cap"));
    }
    if std::str::from_utf8(capped.as_bytes()).is_err() {
        return Err(why("not UTF-8"));
    }
    if !cut && capped != text {
        return Err(why("changed a text that fits"));
    }
    if cut {
        match cap.checked_sub(marker.len()) {
            None => {
                if capped != marker[..cap] {
                    return Err(why("not the marker's first cap bytes"));
                }
            }
            Some(room) => {
                let kept = capped
                    .strip_suffix(marker)
                    .ok_or_else(|| why("no marker"))?;
                if !text.starts_with(kept) || kept.len() > room || room - kept.len() > 3 {
                    return Err(why("not the longest prefix that fits"));
                }
            }
        }
    }
    Ok(())
}
