//! The cost of the last step of every reply: Markdown → WhatsApp markup (`to_whatsapp`) on a
//! realistic ~4 KB Spanish answer and on a ~64 KB one (the same answer 16 times), and cutting a
//! 20,000-character formatted text into messages of at most 4096 characters (`split`).
//!
//! `cargo bench --bench format`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use zaguan::guard::format::to_whatsapp;
use zaguan::guard::split::{MAX_CHARS, split};

/// An answer as the assistants write them: headings, bold, italics, nested lists, a table, a
/// link, a code block, a quote, emojis and accents.
const ANSWER: &str = "\
## 🏡 Tres pisos que encajan con lo que buscas

¡Hola, María! He revisado la cartera con tus criterios (**3 dormitorios**, *exterior*, \
menos de **500.000 €** y cerca del metro) y estas son las opciones que mejor encajan:

| Referencia | Zona | Superficie | Precio |
|------------|------|------------|--------|
| P-102 | Chamberí | 95 m² | 450.000 € |
| P-215 | Malasaña | 88 m² | 389.000 € |
| P-330 | Retiro | 110 m² | 495.000 € |

### P-102 · Chamberí

Piso **reformado en 2022**, muy luminoso, en la calle Fuencarral:

- **Distribución:**
  - 3 dormitorios (uno *en suite*)
  - 2 baños completos, cocina abierta al salón
- **Extras:** terraza de 12 m², aire acondicionado, ~~trastero~~ plaza de garaje opcional
- **Comunidad:** 95 €/mes, IBI 620 €/año

Puedes ver el reportaje completo [aquí](https://inmobiliaria.example/pisos/P-102_chamberi).

### P-215 · Malasaña

Un clásico de techos altos con *mucho encanto*: suelos de madera originales, balcones a la \
calle y a cinco minutos de Tribunal. Necesita una **actualización de la cocina** (calculamos \
unos 15.000 €).

### P-330 · Retiro

El más amplio de los tres, con vistas al parque desde el salón 🌳. Edificio con portero y \
ascensor; la finca está en muy buen estado. La cocina y los baños son de 2019, así que podrías \
entrar a vivir sin obras; lo único pendiente es cambiar las ventanas del dormitorio principal, \
que la comunidad ya ha aprobado subvencionar en parte dentro del plan de eficiencia energética \
del edificio (la derrama prevista es de unos 1.200 € por vivienda).

> ⚠️ *Importante:* los precios pueden cambiar; te confirmo la disponibilidad antes de la visita.

#### Simulación rápida de hipoteca (P-102)

| Concepto | Importe |
|:---|---:|
| Precio de compra | 450.000 € |
| Entrada (20 %) | 90.000 € |
| **Importe financiado** | **360.000 €** |
| Plazo | 30 años |
| Tipo fijo | 3,1 % TAE |
| **Cuota mensual** | **1.537 €** |

Los gastos de compraventa (ITP, notaría, registro) suelen rondar el *10 %* del precio. Si \
quieres afinar el cálculo, puedo pasarte la fórmula:

```text
cuota = capital × i / (1 − (1 + i)^−n)
```

### Documentación que te pedirá el banco

- **Identificación:** DNI o NIE en vigor de todos los titulares
- **Ingresos:**
  - las tres últimas nóminas y la declaración de la renta
  - si eres autónoma, los dos últimos ejercicios y los trimestrales del año
- **Ahorros:** extractos de los últimos seis meses (la entrada debe estar justificada)
- **Deudas:** contratos de préstamos o tarjetas, si los hay

### Preguntas frecuentes

**¿Puedo negociar el precio?** Sí, en los tres casos hay margen. En Malasaña el propietario tiene prisa por vender y aceptaría ofertas en torno a los *375.000 €*; en Chamberí y Retiro el margen es menor, de un 2 % o 3 % como mucho.

**¿Cuánto tarda la compra?** Desde la oferta aceptada hasta la firma en notaría suelen pasar entre **6 y 10 semanas**, sobre todo por la tasación y la aprobación de la hipoteca. Te acompañamos en cada paso y revisamos la nota simple del Registro antes de firmar las arras.

**¿Y la reserva?** Con una señal de 3.000 € retiramos el piso del mercado durante 15 días mientras tramitas la financiación; si el banco no la aprueba, te la devolvemos íntegra.

| Gasto | P-102 | P-215 | P-330 |
|-------|------:|------:|------:|
| ITP (6 %) | 27.000 € | 23.340 € | 29.700 € |
| Notaría y registro | 1.800 € | 1.650 € | 1.900 € |
| Gestoría | 450 € | 450 € | 450 € |
| **Total aproximado** | **29.250 €** | **25.440 €** | **32.050 €** |

Más información sobre el impuesto en la web de la Comunidad: <https://www.comunidad.madrid/servicios/impuestos_itp>.

**Próximos pasos:**

1. Dime qué pisos quieres visitar.
2. Te propongo horarios esta semana (mañanas o tardes).
3. Si te encaja, preparamos la documentación para la oferta.

¿Te viene bien el **jueves a las 18:00** para ver el de Chamberí? 😊
";

fn formatting(c: &mut Criterion) {
    let small = ANSWER;
    let large = ANSWER.repeat(16);
    let mut group = c.benchmark_group("to_whatsapp");
    for (name, markdown) in [("answer_4k", small), ("answer_64k", large.as_str())] {
        group.throughput(Throughput::Bytes(markdown.len() as u64));
        group.bench_function(name, |b| b.iter(|| to_whatsapp(black_box(markdown))));
    }
    group.finish();
}

fn splitting(c: &mut Criterion) {
    let formatted = to_whatsapp(ANSWER);
    let text: String = formatted
        .split_inclusive('\n')
        .cycle()
        .flat_map(str::chars)
        .take(20_000)
        .collect();
    let mut group = c.benchmark_group("split");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("formatted_20k_chars", |b| {
        b.iter(|| split(black_box(&text), MAX_CHARS))
    });
    group.finish();
}

/// What every reply goes through before the outbox: format, then split, a 10 KB answer.
fn whatsapp_parts(c: &mut Criterion) {
    let mut answer = String::new();
    for line in ANSWER.split_inclusive('\n').cycle() {
        if answer.len() + line.len() > 10 * 1024 {
            break;
        }
        answer.push_str(line);
    }
    let mut group = c.benchmark_group("whatsapp_parts");
    group.throughput(Throughput::Bytes(answer.len() as u64));
    group.bench_function("answer_10k", |b| {
        b.iter(|| zaguan::guard::whatsapp_parts(black_box(&answer)))
    });
    group.finish();
}

criterion_group!(benches, formatting, splitting, whatsapp_parts);
criterion_main!(benches);
