use super::to_whatsapp;
use proptest::prelude::*;

/// A property description as an assistant writes it: heading, bold, italics, nested lists,
/// a link, a table of three properties, a code block, emojis and accents.
const PROPERTY_ANSWER: &str = "\
## 🏡 Piso reformado en Chamberí

¡Hola, María! Te cuento los detalles del **piso de la calle Fuencarral**:

- **Superficie:** 95 m² útiles
- **Distribución:**
  - 3 dormitorios (uno *en suite*)
  - 2 baños completos
- **Extras:** terraza de 12 m², ~~trastero~~ plaza de garaje opcional

Puedes ver el reportaje completo [aquí](https://inmobiliaria.example/pisos/P-102_chamberi).

| Referencia | Zona | Precio |
|------------|------|--------|
| P-102 | Chamberí | 450.000 € |
| **P-215** | Malasaña | 389.000 € |
| P-330 | Retiro | 520.000 € |

Para filtrar por precio puedes usar:

```json
{\"zona\": \"Chamberí\", \"max\": 450000}
```

¿Quieres que te reserve una visita? 😊
";

const PROPERTY_WHATSAPP: &str = "\
*🏡 Piso reformado en Chamberí*

¡Hola, María! Te cuento los detalles del *piso de la calle Fuencarral*:

- *Superficie:* 95 m² útiles
- *Distribución:*
  - 3 dormitorios (uno _en suite_)
  - 2 baños completos
- *Extras:* terraza de 12 m², ~trastero~ plaza de garaje opcional

Puedes ver el reportaje completo aquí: https://inmobiliaria.example/pisos/P-102_chamberi.

*P-102* — Zona: Chamberí · Precio: 450.000 €
*P-215* — Zona: Malasaña · Precio: 389.000 €
*P-330* — Zona: Retiro · Precio: 520.000 €

Para filtrar por precio puedes usar:

```
{\"zona\": \"Chamberí\", \"max\": 450000}
```

¿Quieres que te reserve una visita? 😊";

const MORTGAGE_ANSWER: &str = "\
### Simulación de hipoteca

Con los datos que me has dado, esta sería una **estimación orientativa**:

| Concepto | Importe |
|:---|---:|
| Precio de compra | 300.000 € |
| Entrada (20 %) | 60.000 € |
| **Importe financiado** | **240.000 €** |
| Plazo | 30 años |
| Tipo fijo | 3,1 % TAE |
| **Cuota mensual** | **1.025 €** |

> ⚠️ *Importante:* la cuota exacta depende de la oferta vinculante del banco.

Los gastos de compraventa (ITP, notaría, registro) suelen rondar el *10 %* del precio, \
es decir, unos **30.000 €** adicionales.

1. Reúne las tres últimas nóminas.
2. Pide la tasación.
3. Compara al menos dos ofertas.
";

const MORTGAGE_WHATSAPP: &str = "\
*Simulación de hipoteca*

Con los datos que me has dado, esta sería una *estimación orientativa*:

*Precio de compra* — Importe: 300.000 €
*Entrada (20 %)* — Importe: 60.000 €
*Importe financiado* — Importe: *240.000 €*
*Plazo* — Importe: 30 años
*Tipo fijo* — Importe: 3,1 % TAE
*Cuota mensual* — Importe: *1.025 €*

> ⚠️ _Importante:_ la cuota exacta depende de la oferta vinculante del banco.

Los gastos de compraventa (ITP, notaría, registro) suelen rondar el _10 %_ del precio, \
es decir, unos *30.000 €* adicionales.

1. Reúne las tres últimas nóminas.
2. Pide la tasación.
3. Compara al menos dos ofertas.";

#[test]
fn property_description() {
    assert_eq!(to_whatsapp(PROPERTY_ANSWER), PROPERTY_WHATSAPP);
}

#[test]
fn mortgage_simulation() {
    assert_eq!(to_whatsapp(MORTGAGE_ANSWER), MORTGAGE_WHATSAPP);
}

/// (what the LLM wrote, what WhatsApp gets)
fn check(cases: &[(&str, &str)]) {
    for (markdown, expected) in cases {
        assert_eq!(to_whatsapp(markdown), *expected, "for {markdown:?}");
    }
}

#[test]
fn emphasis() {
    check(&[
        ("**negrita** y __negrita__", "*negrita* y *negrita*"),
        ("*cursiva* y _cursiva_", "_cursiva_ y _cursiva_"),
        (
            "~~vendido~~ disponible, ~rebajado~",
            "~vendido~ disponible, ~rebajado~",
        ),
        (
            "***ambas*** y **_ambas_** y _**ambas**_",
            "*_ambas_* y *_ambas_* y *_ambas_*",
        ),
        ("**bold *ital* bold**", "*bold _ital_ bold*"),
        ("****doble****", "*doble*"),
        ("**negrita\npartida** fin", "*negrita*\n*partida* fin"),
        (
            "**[Ver piso](https://x.example/p)** ya",
            "*Ver piso*: https://x.example/p ya",
        ),
    ]);
}

#[test]
fn headings() {
    check(&[
        ("# Título", "*Título*"),
        (
            "# H1\n## H2\n###### H6\nTexto",
            "*H1*\n\n*H2*\n\n*H6*\n\nTexto",
        ),
        ("## **Ya en negrita**", "*Ya en negrita*"),
        ("### Con _cursiva_ dentro", "*Con _cursiva_ dentro*"),
        ("Título\n===\ntexto", "*Título*\n\ntexto"),
        ("#", ""),
    ]);
}

#[test]
fn edge_cases() {
    check(&[
        ("", ""),
        ("  \n\t \n ", ""),
        ("**", ""),
        ("****", ""),
        ("**hola", "hola"),
        ("hola**", "hola"),
        ("**Precio:**450.000 €", "Precio:450.000 €"),
        ("5 * 3 = 15 y 2 * 3 * 4 = 24", "5 * 3 = 15 y 2 * 3 * 4 = 24"),
        ("2 ** 10 = 2**10", "2 ** 10 = 2**10"),
        ("a*b*c y un**gran**piso", "a*b*c y un**gran**piso"),
        ("precio* final", "precio* final"),
        (
            "snake_case_name y __init_data",
            "snake_case_name y __init_data",
        ),
        (
            "https://inmobiliaria.example/pisos/piso_centro_madrid_3",
            "https://inmobiliaria.example/pisos/piso_centro_madrid_3",
        ),
        (
            "Mira https://x.example/_promo_/piso?a=*b*&c=**d**",
            "Mira https://x.example/_promo_/piso?a=*b*&c=**d**",
        ),
        (
            "[ficha](https://x.example/pisos/ficha_P_102_)",
            "ficha: https://x.example/pisos/ficha_P_102_",
        ),
        (
            "Áéíóú ñÑ ü ¿qué? ¡sí! 450 € 👨‍👩‍👧‍👦 🇪🇸",
            "Áéíóú ñÑ ü ¿qué? ¡sí! 450 € 👨‍👩‍👧‍👦 🇪🇸",
        ),
    ]);
}

#[test]
fn links_and_images() {
    check(&[
        (
            "[Ver ficha](https://x.example/ficha)",
            "Ver ficha: https://x.example/ficha",
        ),
        ("<https://x.example/a_b>", "https://x.example/a_b"),
        (
            "Escríbenos a <ventas@x.example>.",
            "Escríbenos a ventas@x.example.",
        ),
        (
            "[https://x.example](https://x.example/)",
            "https://x.example",
        ),
        ("[www.x.example](https://www.x.example)", "www.x.example"),
        ("[](https://x.example)", "https://x.example"),
        (
            "![Salón](https://x.example/salon.jpg)",
            "Salón: https://x.example/salon.jpg",
        ),
        (
            "[ref][1]\n\n[1]: https://x.example/r",
            "ref: https://x.example/r",
        ),
    ]);
}

#[test]
fn lists() {
    check(&[
        ("* uno\n* dos\n+ tres", "- uno\n- dos\n\n- tres"),
        ("3. tres\n4. cuatro", "3. tres\n4. cuatro"),
        ("- a\n  - b\n    - c\n- d", "- a\n  - b\n    - c\n- d"),
        ("1. x\n   - y\n2. z", "1. x\n  - y\n2. z"),
        ("- a\n\n- b\n\n  más de b", "- a\n- b\n  más de b"),
        ("Texto:\n- a\n- b\n\nFin", "Texto:\n\n- a\n- b\n\nFin"),
        ("- línea\n  sigue", "- línea\n  sigue"),
        ("- a\n\n  > cita\n- b", "- a\n  > cita\n- b"),
    ]);
}

#[test]
fn code() {
    check(&[
        ("Usa `precio_max` o `*`.", "Usa `precio_max` o `*`."),
        (
            "```python\nx = 1\n\n\n\ny = 2\n```",
            "```\nx = 1\n\ny = 2\n```",
        ),
        ("    sangrado\n", "```\nsangrado\n```"),
        ("```\n```", ""),
        (
            "- paso:\n\n  ```\n  make\n  ```",
            "- paso:\n  ```\n  make\n  ```",
        ),
    ]);
}

#[test]
fn quotes_rules_html_breaks() {
    check(&[
        ("> cita\n> sigue\n>\n> otra", "> cita\n> sigue\n>\n> otra"),
        ("> a\n>> b\n\nc", "> a\n>\n> > b\n\nc"),
        ("Texto\n\n---\n\nMás", "Texto\n\nMás"),
        ("hola<br>mundo<br/>fin", "hola\nmundo\nfin"),
        (
            "<div>\n  <p>Hola <b>mundo</b></p>\n  <p>adiós</p>\n</div>",
            "Hola mundo\nadiós",
        ),
        ("<!-- nota -->\n\nFin", "Fin"),
        (
            "línea uno  \nlínea dos\nlínea tres",
            "línea uno\nlínea dos\nlínea tres",
        ),
        ("a\n\n\n\n\nb", "a\n\nb"),
        ("| A | B |\n|---|---|", "A · B"),
        (
            "| Ref | Zona |\n|---|---|\n| | Retiro |\n| P-1 | |",
            "Zona: Retiro\n*P-1*",
        ),
        (
            "| Ref | Nota |\n|---|---|\n| P-1 | uno<br>dos |",
            "*P-1* — Nota: uno dos",
        ),
    ]);
}

fn markdownish() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        " ",
        "\n",
        "\n\n",
        "  \n",
        "*",
        "**",
        "_",
        "__",
        "~~",
        "`",
        "```",
        "# ",
        "- ",
        "1. ",
        "> ",
        "| a | b |\n|---|---|\n| c | d |\n",
        "[x](https://x.example/a_b)",
        "<br>",
        "<div>",
        "hola",
        "Chamberí",
        "😀",
        "👨‍👩‍👧‍👦",
        "450 €",
        "    ",
        "\t",
    ]);
    prop_oneof![
        prop::collection::vec(token, 0..80).prop_map(|t| t.concat()),
        "(?s).{0,200}",
    ]
}

proptest! {
    #[test]
    fn output_is_tidy(markdown in markdownish()) {
        let out = to_whatsapp(&markdown);
        prop_assert_eq!(out.trim(), out.as_str());
        prop_assert!(!out.contains("\n\n\n"), "{:?}", out);
        for line in out.lines() {
            prop_assert_eq!(line.trim_end(), line, "trailing space in {:?}", out);
        }
    }
}

/// A link opened right after whitespace that the next line break trims (an ideographic space
/// is three bytes): its start was left inside a character, and the formatter panicked.
/// Found by the `whatsapp_format` fuzz target.
#[test]
fn link_after_trimmed_wide_space() {
    let found =
        "|[\u{200b}|\n\t~`> \u{85}\u{3000}[\r](#>|#!#```-)~_u]\u{fffd}|é|_\t\n>(>[`\u{fffd}\rb.";
    let out = to_whatsapp(found);
    assert_eq!(out.trim(), out);
    assert!(out.contains('é'), "{out:?}");
    assert!(out.ends_with("b."), "{out:?}");
}
