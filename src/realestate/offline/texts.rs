//! What offline mode says in its own words, in Spanish, English and Portuguese; other
//! languages get the Spanish, which guard_translator translates when a model is up.

/// A fixed text in the three languages the offline engine ships.
pub struct Text {
    pub es: &'static str,
    pub en: &'static str,
    pub pt: &'static str,
}

impl Text {
    pub fn in_lang(&self, lang: &str) -> &'static str {
        match lang {
            "en" => self.en,
            "pt" => self.pt,
            _ => self.es,
        }
    }
}

/// Said once, with the first offline reply a conversation gets: each capability it names is
/// served below.
pub const LIMITED_MODE: Text = Text {
    es: "Ahora mismo te atiendo en modo limitado: puedo buscar inmuebles, enseñarte su ficha y \
         sus fotos, darte huecos y reservar visitas, y simular una hipoteca.",
    en: "I'm working in a limited mode right now: I can search listings, show you their details \
         and photos, offer visit slots and book them, and simulate a mortgage.",
    pt: "Neste momento estou a funcionar em modo limitado: posso procurar imóveis, mostrar a \
         ficha e as fotos, indicar horários e marcar visitas, e simular um crédito à habitação.",
};

pub const FOUND: Text = Text {
    es: "He encontrado {n} inmuebles que encajan.",
    en: "I found {n} listings that match.",
    pt: "Encontrei {n} imóveis que correspondem.",
};

pub const FOUND_ONE: Text = Text {
    es: "He encontrado un inmueble que encaja.",
    en: "I found one listing that matches.",
    pt: "Encontrei um imóvel que corresponde.",
};

pub const REFINE: Text = Text {
    es: "Si quieres afinar, dime el precio máximo, las habitaciones o el barrio.",
    en: "To narrow it down, tell me a top price, the bedrooms or the neighbourhood.",
    pt: "Para afinar, diga-me o preço máximo, os quartos ou o bairro.",
};

pub const NONE_FOUND: Text = Text {
    es: "No he encontrado inmuebles disponibles con esos criterios. Prueba con otra zona, otro \
         precio o menos habitaciones.",
    en: "I found no available listings with those criteria. Try another area, another price or \
         fewer bedrooms.",
    pt: "Não encontrei imóveis disponíveis com esses critérios. Experimente outra zona, outro \
         preço ou menos quartos.",
};

pub const ASK_PLACE: Text = Text {
    es: "¿En qué ciudad o barrio buscas?",
    en: "Which city or neighbourhood are you looking in?",
    pt: "Em que cidade ou bairro procura?",
};

pub const PICK_CITY: Text = Text {
    es: "Elige una ciudad o escríbeme el barrio.",
    en: "Pick a city or write me the neighbourhood.",
    pt: "Escolha uma cidade ou escreva o bairro.",
};

pub const ASK_OPERATION: Text = Text {
    es: "¿Buscas para comprar o para alquilar?",
    en: "Are you looking to buy or to rent?",
    pt: "Procura para comprar ou para arrendar?",
};

/// The buttons of [`ASK_OPERATION`]: each title reads back as its operation.
pub const BUY: Text = Text {
    es: "Comprar",
    en: "Buy",
    pt: "Comprar",
};
pub const RENT: Text = Text {
    es: "Alquilar",
    en: "Rent",
    pt: "Arrendar",
};

pub const SHARE_LOCATION: Text = Text {
    es: "Para buscar cerca de ti, compárteme tu ubicación (📎 → Ubicación) o dime una ciudad o \
         un barrio.",
    en: "To search near you, share your location with me (📎 → Location) or tell me a city or a \
         neighbourhood.",
    pt: "Para procurar perto de si, partilhe a sua localização (📎 → Localização) ou diga-me uma \
         cidade ou um bairro.",
};

pub const WHICH_LISTING: Text = Text {
    es: "¿Qué inmueble? Dime su referencia (por ejemplo P-1001) o búscalo: dime ciudad, compra o \
         alquiler y habitaciones.",
    en: "Which listing? Tell me its reference (for example P-1001) or search for it: tell me the \
         city, buy or rent, and bedrooms.",
    pt: "Que imóvel? Diga-me a referência (por exemplo P-1001) ou procure-o: diga-me a cidade, \
         compra ou arrendamento e quartos.",
};

pub const SLOTS: Text = Text {
    es: "Estos son los huecos libres para visitar {id}.",
    en: "These are the free slots to visit {id}.",
    pt: "Estes são os horários livres para visitar {id}.",
};

pub const NO_SLOTS: Text = Text {
    es: "Ahora no quedan huecos libres para visitar {id} en los próximos días. Si quieres que te \
         atienda una persona, escríbeme «quiero hablar con una persona».",
    en: "There are no free slots to visit {id} in the coming days. If you want a person to help \
         you, write «I want to talk to a person».",
    pt: "Não há horários livres para visitar {id} nos próximos dias. Se quiser ser atendido por \
         uma pessoa, escreva «quero falar com uma pessoa».",
};

pub const CONFIRM_FIRST: Text = Text {
    es: "Antes de hacerlo, necesito tu confirmación.",
    en: "Before I do it, I need your confirmation.",
    pt: "Antes de o fazer, preciso da sua confirmação.",
};

pub const DECLINED: Text = Text {
    es: "De acuerdo, no he hecho nada. ¿Te ayudo con otra cosa?",
    en: "All right, I've done nothing. Can I help with something else?",
    pt: "Muito bem, não fiz nada. Posso ajudar com outra coisa?",
};

pub const SLOT_TAKEN: Text = Text {
    es: "Ese hueco ya no está libre. Elige otro, por favor.",
    en: "That slot is no longer free. Please pick another one.",
    pt: "Esse horário já não está livre. Escolha outro, por favor.",
};

pub const FAILED: Text = Text {
    es: "No he podido hacerlo ahora mismo. Si quieres que te atienda una persona, escríbeme \
         «quiero hablar con una persona».",
    en: "I couldn't do it right now. If you want a person to help you, write «I want to talk to \
         a person».",
    pt: "Não consegui fazê-lo agora. Se quiser ser atendido por uma pessoa, escreva «quero falar \
         com uma pessoa».",
};

pub const NOT_AN_OWNER: Text = Text {
    es: "No encuentro inmuebles asociados a este número. Si quieres que te atienda una persona, \
         escríbeme «quiero hablar con una persona».",
    en: "I can't find any listings linked to this number. If you want a person to help you, \
         write «I want to talk to a person».",
    pt: "Não encontro imóveis associados a este número. Se quiser ser atendido por uma pessoa, \
         escreva «quero falar com uma pessoa».",
};

pub const OFFER_OUT_OF_RANGE: Text = Text {
    es: "Esa cantidad está muy lejos del precio que se pide. Escríbeme otra cantidad, por \
         ejemplo «ofrezco 240.000 €».",
    en: "That amount is very far from the asking price. Write me another amount, for example \
         «I offer €240,000».",
    pt: "Esse valor está muito longe do preço pedido. Escreva outro valor, por exemplo \
         «ofereço 240.000 €».",
};

pub const HOW_WAS_IT: Text = Text {
    es: "¿Qué te pareció la visita a {title}?",
    en: "How did you find the visit to {title}?",
    pt: "O que achou da visita a {title}?",
};
/// The answers to [`HOW_WAS_IT`], by the visit outcome they record.
pub const INTERESTED: Text = Text {
    es: "Me interesa",
    en: "I'm interested",
    pt: "Tenho interesse",
};
pub const NOT_INTERESTED: Text = Text {
    es: "No me convence",
    en: "Not for me",
    pt: "Não me convence",
};
pub const SECOND_VISIT: Text = Text {
    es: "Verlo otra vez",
    en: "See it again",
    pt: "Ver outra vez",
};

pub const NO_APPOINTMENTS: Text = Text {
    es: "No tienes visitas reservadas próximamente.",
    en: "You have no upcoming visits booked.",
    pt: "Não tem visitas marcadas para os próximos dias.",
};

pub const PICK_TO_CANCEL: Text = Text {
    es: "¿Qué visita quieres cancelar?",
    en: "Which visit do you want to cancel?",
    pt: "Que visita quer cancelar?",
};

pub const PICK_TO_MOVE: Text = Text {
    es: "¿Qué visita quieres cambiar?",
    en: "Which visit do you want to move?",
    pt: "Que visita quer alterar?",
};

pub const ASK_MORTGAGE: Text = Text {
    es: "Dime el precio de la vivienda (y, si quieres, la entrada y los años) y te calculo la \
         cuota. Por ejemplo: «250.000 €, entrada 60.000, 30 años».",
    en: "Tell me the price of the home (and, if you like, the down payment and the years) and \
         I'll work out the monthly payment. For example: «€250,000, 60,000 down, 30 years».",
    pt: "Diga-me o preço da casa (e, se quiser, a entrada e os anos) e calculo a prestação. Por \
         exemplo: «250.000 €, entrada 60.000, 30 anos».",
};

pub const ESTIMATE: Text = Text {
    es: "Es una estimación, no una oferta de un banco.",
    en: "It is an estimate, not a bank's offer.",
    pt: "É uma estimativa, não uma proposta de um banco.",
};

pub const ASK_OFFER_AMOUNT: Text = Text {
    es: "¿Cuánto quieres ofrecer por {id}? Escríbeme la cantidad, por ejemplo «ofrezco 240.000 €».",
    en: "How much do you want to offer for {id}? Write me the amount, for example «I offer \
         €240,000».",
    pt: "Quanto quer oferecer por {id}? Escreva o valor, por exemplo «ofereço 240.000 €».",
};

pub const MENU: Text = Text {
    es: "¿En qué te ayudo? Elige una opción o escríbemelo.",
    en: "How can I help? Pick an option or write it to me.",
    pt: "Em que posso ajudar? Escolha uma opção ou escreva.",
};

/// The menu's rows, each for the assistant that serves it.
pub const MENU_SEARCH: Text = Text {
    es: "Buscar un inmueble",
    en: "Search listings",
    pt: "Procurar imóvel",
};
pub const MENU_APPOINTMENTS: Text = Text {
    es: "Mis visitas",
    en: "My visits",
    pt: "As minhas visitas",
};
pub const MENU_MORTGAGE: Text = Text {
    es: "Calcular una hipoteca",
    en: "Mortgage estimate",
    pt: "Simular crédito",
};
pub const MENU_OFFERS: Text = Text {
    es: "Mis ofertas",
    en: "My offers",
    pt: "As minhas ofertas",
};
pub const MENU_OWNER: Text = Text {
    es: "Cómo va mi inmueble",
    en: "How my listing is doing",
    pt: "Como vai o meu imóvel",
};
pub const MENU_PERSON: Text = Text {
    es: "Hablar con una persona",
    en: "Talk to a person",
    pt: "Falar com uma pessoa",
};

/// Why the staff are told, when an offline assistant cannot serve the request itself.
pub const HANDOFF_REASON: &str = "Modo sin modelo: el cliente pide algo que el asistente no \
                                  puede resolver solo";
