//! Phone numbers as staff type them («600 12 34 56», «+34 600-123-456», «0034600123456»)
//! made into the WhatsApp id Meta sends (`34600123456`: country code and number, digits only),
//! so a number typed into `zaguan staff add` is the same one that writes in.

use super::WaId;

/// The region a number without a country code is read in (`ZAGUAN_PHONE_REGION`, ISO 3166
/// alpha-2 like `ES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhoneRegion(phonenumber::country::Id);

impl PhoneRegion {
    pub fn parse(code: &str) -> Result<Self, String> {
        code.trim()
            .to_ascii_uppercase()
            .parse::<phonenumber::country::Id>()
            .map(PhoneRegion)
            .map_err(|_| format!("`{code}` is not a country code like `ES`"))
    }
}

impl Default for PhoneRegion {
    fn default() -> Self {
        PhoneRegion(phonenumber::country::Id::ES)
    }
}

/// `raw` as a WhatsApp id: a valid number, national in `region` or international (with `+`,
/// `00`, or the country code's digits alone, the form WhatsApp itself uses).
pub fn wa_id_of(raw: &str, region: PhoneRegion) -> Result<WaId, String> {
    let typed = raw.trim();
    if typed.is_empty() {
        return Err("the number is empty".to_owned());
    }
    if typed
        .chars()
        .any(|c| !(c.is_ascii_digit() || " +-().\u{a0}/".contains(c)))
    {
        return Err(format!(
            "`{typed}` is not a phone number: only digits, spaces, +, -, ( and ) are allowed"
        ));
    }
    let digits: String = typed.chars().filter(char::is_ascii_digit).collect();
    let international = if let Some(rest) = digits.strip_prefix("00") {
        Some(format!("+{rest}"))
    } else if typed.starts_with('+') {
        Some(format!("+{digits}"))
    } else {
        None
    };
    let candidates = match international {
        Some(number) => vec![(None, number)],
        // National first («600123456»); else the digits as WhatsApp writes them
        // («34600123456»).
        None => vec![
            (Some(region.0), digits.clone()),
            (None, format!("+{digits}")),
        ],
    };
    candidates
        .into_iter()
        .filter_map(|(region, text)| phonenumber::parse(region, &text).ok())
        .find(phonenumber::is_valid)
        .map(|number| {
            let e164 = number.format().mode(phonenumber::Mode::E164).to_string();
            WaId::parse(e164.trim_start_matches('+')).expect("digits are a valid id")
        })
        .ok_or_else(|| {
            format!(
                "`{typed}` is not a valid phone number (read in {}; write +CC for another country)",
                region.0.as_ref()
            )
        })
}

/// The country calling code of a WhatsApp id (`34` for `34600123456`), where it is a phone
/// number: Meta prices a message by the recipient's.
pub fn country_code(wa_id: &WaId) -> Option<u16> {
    phonenumber::parse(None, format!("+{}", wa_id.as_str()))
        .ok()
        .map(|number| number.code().value())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wa_ids_country_code_is_read_from_its_digits() {
        let code = |id: &str| country_code(&WaId::parse(id).unwrap());
        assert_eq!(code("34600123456"), Some(34));
        assert_eq!(code("5215512345678"), Some(52));
        assert_eq!(code("16505551234"), Some(1));
        assert_eq!(
            code("ES.13491208655302741918"),
            None,
            "a BSUID is no number"
        );
    }

    #[test]
    fn numbers_as_staff_type_them_become_whatsapp_ids() {
        let es = PhoneRegion::default();
        for typed in [
            "600 12 34 56",
            "600123456",
            "+34 600 123 456",
            "+34-600-123-456",
            "0034600123456",
            "34600123456",
            "(+34) 600 12 34 56",
        ] {
            assert_eq!(
                wa_id_of(typed, es).map(|w| w.as_str().to_owned()),
                Ok("34600123456".to_owned()),
                "{typed}"
            );
        }
        assert_eq!(
            wa_id_of("+44 7911 123456", es).unwrap().as_str(),
            "447911123456"
        );
        let pt = PhoneRegion::parse("pt").unwrap();
        assert_eq!(
            wa_id_of("912 345 678", pt).unwrap().as_str(),
            "351912345678"
        );
    }

    #[test]
    fn what_is_not_a_number_is_refused_with_the_reason() {
        let es = PhoneRegion::default();
        assert!(wa_id_of("", es).unwrap_err().contains("empty"));
        assert!(
            wa_id_of("llamar a Lucía", es)
                .unwrap_err()
                .contains("only digits")
        );
        assert!(wa_id_of("12345", es).unwrap_err().contains("not a valid"));
        assert!(PhoneRegion::parse("Spain").is_err());
    }
}
